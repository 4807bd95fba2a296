"""Note [Fixes at run time]
~~~~~~~~~~~~~~~~~~~~~~~~~~
`tidemark diagnose --verify` measures what a finding's fix saves by running the program again
under the estimate with the fix applied from outside, its source untouched
(TIDEMARK_ESTIMATE_FIX: a comma-separated list of these names). Each does at run time what the
finding's advice asks of the program, and nothing else:

  grads-to-none     stale-grads: every optimizer step is followed by setting its parameters'
                    gradients to None, and zero_grad always sets to None -- as
                    `zero_grad(set_to_none=True)` at the start of each step would;
  foreach-off       optimizer-peak: each step runs with its param groups' `foreach=False`
                    (one parameter at a time), as `torch.optim.AdamW(..., foreach=False)`;
  autocast-per-step autocast-cache across steps: autocast's cache of weight copies is cleared
                    before each optimizer step, as closing the region after each forward does;
  no-grad           grad-in-eval: grad mode off from the start, as torch.no_grad() around a
                    forward no backward follows; a program that then calls backward fails,
                    which says the fix does not fit it.

A fix the program does not take (it reads the gradients after the step, it calls backward)
makes the run fail; the command then says the saving could not be measured, and why.
"""
import importlib

NAMES = ("grads-to-none", "foreach-off", "autocast-per-step", "no-grad")


def _optimizer_hooks():
    # torch.optim.optimizer is a module torch 2.15 imports without making it an attribute of
    # torch.optim: imported by name.
    return importlib.import_module("torch.optim.optimizer")


def grads_to_none(torch, notes):
    def clear(optimizer, args, kwargs):
        for group in optimizer.param_groups:
            for p in group["params"]:
                p.grad = None

    _optimizer_hooks().register_optimizer_step_post_hook(clear)
    for cls in (torch.optim.Optimizer, torch.nn.Module):
        real = cls.zero_grad

        def zero_grad(self, set_to_none=True, _real=real):
            return _real(self, set_to_none=True)

        cls.zero_grad = zero_grad


def foreach_off(torch, notes):
    def single(optimizer, args, kwargs):
        for group in optimizer.param_groups:
            if "foreach" in group and not group.get("fused"):
                group["foreach"] = False

    _optimizer_hooks().register_optimizer_step_pre_hook(single)


def autocast_per_step(torch, notes):
    _optimizer_hooks().register_optimizer_step_pre_hook(
        lambda optimizer, args, kwargs: torch.clear_autocast_cache())


def no_grad(torch, notes):
    torch.set_grad_enabled(False)


FIXES = {"grads-to-none": grads_to_none, "foreach-off": foreach_off,
         "autocast-per-step": autocast_per_step, "no-grad": no_grad}


def apply(torch, names, notes):
    """Applies the fixes named (a comma-separated string); an unknown name is refused."""
    for name in filter(None, (n.strip() for n in names.split(","))):
        if name not in FIXES:
            raise ValueError(f"unknown fix {name!r} (known: {', '.join(NAMES)})")
        FIXES[name](torch, notes)
        notes.emulated("fix applied at run time", name)
