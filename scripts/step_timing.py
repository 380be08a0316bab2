"""Timing helpers shared by the sinks and varlen timing scripts (time_sinks_training.py,
time_sinks_decode.py, time_varlen_skewed.py): a call's median time by CUDA events behind a sleep,
and its kernels' device times by torch.profiler."""

import statistics

import torch
from torch.profiler import ProfilerActivity, profile

SLEEP_CYCLES = 2_000_000  # about 1 ms at the H200's clock


def median_ms(step, warmup=3, iterations=20):
    """Median of `iterations` CUDA-event timings of step() after `warmup` calls. A sleep queued
    first keeps the call's host time (Python, the bindings, the launches) out of the interval:
    the GPU starts the call once it is queued whole."""
    times = []
    for i in range(warmup + iterations):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(SLEEP_CYCLES)
        start.record()
        step()
        stop.record()
        torch.cuda.synchronize()
        if i >= warmup:
            times.append(start.elapsed_time(stop))
    return statistics.median(times)


def kernel_times(step):
    """(kernel name, device microseconds) of each CUDA kernel one step() launches."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    return [(event.key, event.device_time_total) for event in prof.key_averages()
            if event.device_type == torch.autograd.DeviceType.CUDA]


def print_kernel_times(step):
    for name, us in kernel_times(step):
        print(f"    {name[:90]:90s} {us:9.1f} us")
