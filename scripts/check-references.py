#!/usr/bin/env python3
"""Every file that a comment or a doc names exists.

A path named in prose -- a comment of a source file, a CMake or shell comment, a Markdown line
outside a code block -- is checked against the files git tracks:

* `dir/name.ext` whose first folder is one of the repository's top-level folders must be a
  tracked file (relative to the root or to the naming file's folder);
* `dir/name.ext` whose first folder is not a top-level one counts only when some tracked path
  ends with its folder (`core/storage.h` inside tensorlib/): a path of another project
  (PyTorch's `c10/cuda/CUDACachingAllocator.cpp`) is not ours to check;
* a bare `NAME.md` starting with a capital letter (`README.md`, `DESIGN.md`) must exist in the
  naming file's folder or the root.

Code (inside Markdown fences, or in source outside comments) is not prose and is skipped: the
compiler and the tests check that. Exit status 1 and one `FILE:LINE: PATH` line per missing
file; 0 when every named file exists.
"""
import os
import re
import subprocess
import sys

PATH = re.compile(r'(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.(?:h|cpp|cu|cuh|md|py|sh|txt|cmake|in))(?![\w/])')
SOURCE = re.compile(r'\.(h|cpp|cu|cuh)$')
HASH_COMMENTS = re.compile(r'\.(py|sh|cmake)$|(^|/)CMakeLists\.txt$|(^|/)Makefile$|^\.ci/run$')


def prose_lines(name, text):
    """(line number, text) of the prose of a file: comments, or Markdown outside fences."""
    lines = text.splitlines()
    if name.endswith('.md'):
        fenced = False
        for n, line in enumerate(lines, 1):
            if line.lstrip().startswith('```'):
                fenced = not fenced
            elif not fenced:
                yield n, line
    elif HASH_COMMENTS.search(name):
        for n, line in enumerate(lines, 1):
            i = line.find('#')
            if i >= 0 and not line.lstrip().startswith('#include'):
                yield n, line[i:]
    elif SOURCE.search(name):
        in_block = False
        for n, line in enumerate(lines, 1):
            part = ''
            if in_block:
                end = line.find('*/')
                part = line if end < 0 else line[:end]
                in_block = end < 0
            else:
                slash, star = line.find('//'), line.find('/*')
                if slash >= 0 and (star < 0 or slash < star):
                    part = line[slash:]
                elif star >= 0:
                    end = line.find('*/', star)
                    part = line[star:] if end < 0 else line[star:end]
                    in_block = end < 0
            if part:
                yield n, part


def missing(root):
    tracked = subprocess.check_output(['git', '-C', root, 'ls-files'], text=True).split('\n')
    tracked = [t for t in tracked if t]
    files = set(tracked)
    top = {t.split('/')[0] for t in tracked if '/' in t}
    tails, folder_tails = set(), set()
    for t in tracked:
        parts = t.split('/')
        for i in range(1, len(parts)):
            tails.add('/'.join(parts[i:]))
            if i < len(parts) - 1:
                folder_tails.add('/'.join(parts[i:-1]))
    found = []
    for name in tracked:
        if name.startswith('tests/data/') or not (
                name.endswith('.md') or SOURCE.search(name) or HASH_COMMENTS.search(name)):
            continue
        try:
            with open(os.path.join(root, name), encoding='utf-8') as f:
                text = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        here = os.path.dirname(name)
        for n, line in prose_lines(name, text):
            for m in PATH.finditer(line):
                ref = m.group(1)
                beside = os.path.normpath(os.path.join(here, ref))
                if '/' in ref:
                    ours = ref.split('/')[0] in top or ref.split('/')[0] == '..' or \
                        os.path.dirname(ref) in folder_tails or \
                        os.path.isdir(os.path.join(root, here, ref.split('/')[0]))
                    if not ours:
                        continue
                    if ref in files or beside in files or ref in tails:
                        continue
                elif ref.endswith('.md') and ref[0].isupper():
                    if ref in files or beside in files:
                        continue
                else:
                    continue
                found.append((name, n, ref))
    return found


def self_test():
    """The rules above on a repository made for the purpose."""
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        def write(name, text):
            os.makedirs(os.path.join(root, os.path.dirname(name)), exist_ok=True)
            with open(os.path.join(root, name), 'w', encoding='utf-8') as f:
                f.write(text)
        write('lib/core/a.h', '// see lib/core/b.h, core/gone.h and c10/cuda/Allocator.cpp\n'
                              'int x = f("lib/not_prose.h");\n')
        write('lib/core/b.h', '/* DESIGN.md\n   and core/a.h */\n')
        write('docs/x.md', 'See `lib/core/a.h`, docs/y.md and README.md.\n'
                           '```\nlib/fenced.h\n```\n')
        write('README.md', '')
        subprocess.run(['git', 'init', '-q', root], check=True)
        subprocess.run(['git', '-C', root, 'add', '-A'], check=True)
        got = sorted((name, ref) for name, _, ref in missing(root))
        want = [('docs/x.md', 'docs/y.md'), ('lib/core/a.h', 'core/gone.h'),
                ('lib/core/b.h', 'DESIGN.md')]
        if got != want:
            print(f'self-test: found {got}, expected {want}', file=sys.stderr)
            return 1
    print('self-test: ok')
    return 0


def main():
    if sys.argv[1:] == ['--self-test']:
        return self_test()
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
    found = missing(root)
    for name, n, ref in found:
        print(f'{name}:{n}: names {ref}, which is not in the tree')
    if found:
        print(f'{len(found)} named file(s) missing', file=sys.stderr)
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
