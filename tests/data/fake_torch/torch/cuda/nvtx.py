_stack = []


def range_push(msg):
    _stack.append(msg)
    return len(_stack) - 1


def range_pop():
    return len(_stack) - 1 if _stack and _stack.pop() is not None else -1
