"""Pieces shared by the GPU side-by-side decode benchmarks (bench/gpu_decoder_torch.py,
bench/gpu_genai_torch.py): the HBM read bandwidth measured in the same process, and a
per-kernel GPU time profile of a callable (torch.profiler; CUPTI sees every launch of the
process, Fusebox's too)."""
import time


def read_bandwidth(torch, dev):
    """HBM read bandwidth (bytes/s): a sum over 4 GiB, best of 10."""
    x = torch.ones(1 << 30, device=dev, dtype=torch.float32)
    for _ in range(3):
        x.sum()
    best = 1e9
    for _ in range(10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        x.sum()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    del x
    return (1 << 32) / best


def copy_bandwidth(torch, dev):
    """Device-to-device copy of 2 GiB, best of 10: bytes read per second (as many are written)."""
    x = torch.ones(1 << 29, device=dev, dtype=torch.float32)
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    best = 1e9
    for _ in range(10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y.copy_(x)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    del x, y
    return (1 << 31) / best


def gpu_profile(torch, fn, steps=8):
    """Every kernel and copy of fn() on the GPU (CUPTI through torch.profiler sees the whole
    process, Fusebox's launches too), summed by name, per decode step."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    rows = []
    for e in prof.key_averages():
        dt = getattr(e, "self_device_time_total", None)
        if dt is None:
            dt = getattr(e, "self_cuda_time_total", 0)
        if dt > 0:
            rows.append((dt, e.count, e.key))
    rows.sort(reverse=True)
    tot = sum(r[0] for r in rows)
    n = sum(r[1] for r in rows)
    print("[profile] %d steps under the profiler: wall %.2f ms/step; GPU busy %.2f ms/step in %.0f launches/step"
          % (steps, 1e3 * wall / steps, tot / 1e3 / steps, n / steps))
    for dt, cnt, key in rows[:30]:
        print("[profile] %8.1f us/step %6.1f calls/step  %5.1f%%  %s"
              % (dt / steps, cnt / steps, 100.0 * dt / max(tot, 1e-9), key[:110]))
