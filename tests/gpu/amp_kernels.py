"""Which kernels of tests/python/torch_amp.py's micro-batch change with its size (a diagnostic, not a
test; no shim): one forward and backward per bucket size, fresh gradients then accumulated (the step's
two micro-batches), each run under torch.profiler after a warm-up, and the kernels' names compared with
the largest size's in order. A kernel that another size replaces by another function (not only other
grid sizes) splits the point of the iteration after that segment even with AUTOGRAPH_SEGMENT_KEY=shape_free.
Run on the GPU machine: python3 tests/gpu/amp_kernels.py"""
import difflib
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import torch_amp  # noqa: E402
from report import deterministic  # noqa: E402


def kernels(fn):
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    ev.sort(key=lambda e: e.time_range.start)
    return [e.name for e in ev]


def main():
    deterministic(0)
    dev = torch.device("cuda")
    model = torch_amp.make_model().to(dev)
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 10)
    big = max(torch_amp.BUCKETS)
    xs = torch.randn(big, torch_amp.WIDTH, device=dev)
    ys = torch.randint(0, torch_amp.OUT, (big,), device=dev)

    def micro(b, fresh):
        def fn():
            if fresh:
                model.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(xs[:b]), ys[:b]) / 2
            scaler.scale(loss).backward()
            loss.item()
        return fn

    for fresh in (True, False):
        print(f"== micro-batch {'1 (fresh gradients)' if fresh else '2 (accumulated)'}")
        ref = None
        for b in torch_amp.BUCKETS:
            if not fresh:
                micro(b, True)()
            names = kernels(micro(b, fresh))
            if ref is None:
                ref = names
                print(f"size {b}: {len(names)} kernels (the reference)")
                for n in sorted(set(names)):
                    print(f"   {names.count(n):3d} x {n[:150]}")
                continue
            sm = difflib.SequenceMatcher(a=ref, b=names, autojunk=False)
            diff = [op for op in sm.get_opcodes() if op[0] != "equal"]
            print(f"size {b}: {len(names)} kernels, {len(diff)} runs differ from size {torch_amp.BUCKETS[0]}")
            for tag, i1, i2, j1, j2 in diff:
                print(f"   {tag} at {i1}: {[n[:110] for n in ref[i1:i2]]} -> {[n[:110] for n in names[j1:j2]]}")


if __name__ == "__main__":
    main()
