#!/usr/bin/env python3
"""The tree keeps its layering: a folder includes only what its library links.

Every library is a folder with its own CMakeLists.txt (docs/architecture.md, "Layering"). This
reads the links from those files -- `add_library` / `add_executable` say which folder a target
is, `target_link_libraries` which targets it links -- and checks every `#include` of a header
of profiler/, tensorlib/ or gui/ in a source file under profiler/, tensorlib/, cli/, gui/,
python/ and interpose/ against them:

* a file may include its own folder, and the folders its library links, directly or through
  the libraries those link;
* `tensorlib/memory/sizes.h` is the allocator's size policy, header-only and dependency-free
  (it includes nothing of ours): anyone may include it;
* the trace's SQL is the store's alone: outside profiler/store no source file includes
  `profiler/store/sqlite_db.h` (tests and benchmarks may: they read the file as an
  independent check).

Exit status 1 and one `FILE:LINE: message` per breach; 0 when the tree keeps its layering.
`--self-test` checks the checker on a tree it makes.
"""
import os
import re
import sys
import tempfile

TOPS = ['profiler', 'tensorlib', 'cli', 'gui', 'python', 'interpose']
HEADER_ONLY = {'tensorlib/memory/sizes.h'}
STORE_ONLY = {'profiler/store/sqlite_db.h'}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]((?:profiler|tensorlib|gui)/[^">]+)[">]')
DECLARE = re.compile(r'\b(?:add_library|add_executable|pybind11_add_module)\(\s*([\w-]+)')
LINK = re.compile(r'\btarget_link_libraries\(\s*([\w-]+)([^)]*)\)', re.S)
SOURCE = re.compile(r'\.(h|cpp|cu|cuh)$')


def folder_of(root, path):
    """The library folder `path` (relative to root) lies in: the deepest one with a
    CMakeLists.txt, below a top folder."""
    parts = path.split('/')
    for n in range(len(parts) - 1, 0, -1):
        candidate = '/'.join(parts[:n])
        if os.path.exists(os.path.join(root, candidate, 'CMakeLists.txt')):
            return candidate
    return parts[0]


def read_links(root):
    """folder -> the folders its targets link (directly)."""
    target_folder, links = {}, {}
    lists = []
    for top in TOPS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            if 'CMakeLists.txt' in files:
                rel = os.path.relpath(dirpath, root).replace(os.sep, '/')
                text = open(os.path.join(dirpath, 'CMakeLists.txt'), errors='replace').read()
                text = re.sub(r'#[^\n]*', '', text)
                lists.append((rel, text))
                for m in DECLARE.finditer(text):
                    target_folder.setdefault(m.group(1), rel)
    for rel, text in lists:
        for m in LINK.finditer(text):
            if target_folder.get(m.group(1)) != rel:
                continue  # a test or tool target declared elsewhere
            for token in re.findall(r'[\w-]+', m.group(2)):
                dep = target_folder.get(token)
                if dep and dep != rel:
                    links.setdefault(rel, set()).add(dep)
    return links


def closure(links, folder):
    seen, todo = set(), [folder]
    while todo:
        for dep in links.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def check(root):
    links = read_links(root)
    allowed = {}
    breaches = []
    for top in TOPS:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for name in sorted(files):
                if not SOURCE.search(name):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, '/')
                here = folder_of(root, path)
                if here not in allowed:
                    allowed[here] = closure(links, here) | {here}
                for n, line in enumerate(open(os.path.join(root, path), errors='replace'), 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    included = m.group(1)
                    if included in STORE_ONLY and not here.startswith('profiler/store'):
                        breaches.append(f'{path}:{n}: includes {included}: the trace\'s SQL is '
                                        'the store\'s (ask profiler/store\'s query interface)')
                        continue
                    if included in HEADER_ONLY:
                        continue
                    there = folder_of(root, included)
                    if there not in allowed[here]:
                        breaches.append(f'{path}:{n}: {here} includes {included}, but its library '
                                        f'does not link {there}')
    return breaches


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def write(path, text):
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), 'w') as f:
                f.write(text)
        write('profiler/events/CMakeLists.txt', 'add_library(ev INTERFACE)\n')
        write('profiler/store/CMakeLists.txt', 'add_library(st a.cpp)\ntarget_link_libraries(st PUBLIC ev)\n')
        write('profiler/analysis/CMakeLists.txt',
              'add_library(an a.cpp)\ntarget_link_libraries(an PUBLIC st)  # not pk\n')
        write('profiler/pickle/CMakeLists.txt', 'add_library(pk a.cpp)\n')
        write('profiler/store/sqlite_db.h', '')
        write('profiler/events/events.h', '')
        write('profiler/pickle/pickle.h', '')
        write('profiler/store/a.cpp', '#include "profiler/store/sqlite_db.h"\n#include "profiler/events/events.h"\n')
        write('profiler/analysis/a.cpp', '#include "profiler/events/events.h"\n'
              '#include "profiler/pickle/pickle.h"\n#include "profiler/store/sqlite_db.h"\n'
              '#include "tensorlib/memory/sizes.h"\n')
        got = check(root)
        want = ['profiler/analysis/a.cpp:2: profiler/analysis includes profiler/pickle/pickle.h, '
                'but its library does not link profiler/pickle',
                'profiler/analysis/a.cpp:3: includes profiler/store/sqlite_db.h: the trace\'s SQL '
                'is the store\'s (ask profiler/store\'s query interface)']
        if got != want:
            print('self-test failed:\n  got  ' + '\n  got  '.join(got) + '\n  want ' +
                  '\n  want '.join(want), file=sys.stderr)
            return 1
    print('check-layering.py: self-test passed')
    return 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        print('usage: check-layering.py REPOSITORY_ROOT | --self-test', file=sys.stderr)
        return 2
    breaches = check(argv[1])
    for b in breaches:
        print(b)
    if breaches:
        print(f'check-layering.py: {len(breaches)} includes break the layering', file=sys.stderr)
        return 1
    print('check-layering.py: every include follows the libraries\' links')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
