"""A sampling profiler for a server the benches start: `python bench/sampler.py OUT -m module args...` runs `module`
as `python -m module args...` would, with a thread that, between SIGUSR1 and SIGUSR2, samples every thread's Python
stack each millisecond (the interpreter's switch interval set to that too), weighted by the CPU time the thread used since the previous tick (its POSIX thread CPU
clock: a thread that waited on a socket, a lock or the GIL meanwhile counts for nothing). The stack seen is
where the thread is at the tick, so a share is right over many ticks, not for any one. On SIGUSR2 it writes OUT: one line per distinct stack,
`thread NAME;frame;...;leaf microseconds` (a thread's name without its number) (the "collapsed" format flame-graph tools read), and OUT.txt: the functions by share of
samples, inclusive and own. `bench/concurrency.py --profile OUT` starts its server this way around the measured part.
"""

import collections
import os
import runpy
import signal
import sys
import threading
import time

INTERVAL_S = 0.001


def _runtime_ns(ident: int) -> int:
    """Nanoseconds the thread `ident` has spent on a CPU (its POSIX thread CPU clock)."""
    try:
        return time.clock_gettime_ns(time.pthread_getcpuclockid(ident))
    except (OSError, OverflowError):
        return 0


def _label(code) -> str:
    path = code.co_filename
    for marker in ("site-packages/", "/work/main/", "lib/python3"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{code.co_name}"


class Sampler:
    def __init__(self, out: str) -> None:
        self.out = out
        self.stacks: collections.Counter = collections.Counter()
        self.samples = 0
        self.last: dict[int, int] = {}
        self.on = threading.Event()
        self.me = None

    def loop(self) -> None:
        self.me = threading.get_ident()
        while True:
            self.on.wait()
            names = {t.ident: t.name for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == self.me:
                    continue
                now = _runtime_ns(ident)
                spent, self.last[ident] = now - self.last.get(ident, now), now
                if spent <= 0:
                    continue
                stack = []
                while frame is not None:
                    stack.append(_label(frame.f_code))
                    frame = frame.f_back
                thread = "thread " + names.get(ident, "?").rstrip("0123456789_-").split(" (")[0]
                self.stacks[";".join([thread, *reversed(stack)])] += spent // 1000
            self.samples += 1
            time.sleep(INTERVAL_S)

    def start(self, *_) -> None:
        sys.setswitchinterval(INTERVAL_S)
        self.stacks.clear()
        self.last.clear()
        self.samples = 0
        self.on.set()

    def stop(self, *_) -> None:
        self.on.clear()
        time.sleep(0.05)
        stacks = dict(self.stacks)
        with open(self.out, "w") as f:
            for stack, n in sorted(stacks.items(), key=lambda kv: -kv[1]):
                f.write(f"{stack} {n}\n")
        total = sum(stacks.values()) or 1
        inclusive: collections.Counter = collections.Counter()
        own: collections.Counter = collections.Counter()
        for stack, n in stacks.items():
            frames = stack.split(";")
            for name in set(frames):
                inclusive[name] += n
            own[frames[-1]] += n
        with open(self.out + ".txt", "w") as f:
            f.write(f"{total / 1e6:.2f} s of thread CPU over {self.samples} ticks\n\ninclusive\n")
            for name, n in inclusive.most_common(150):
                f.write(f"{100 * n / total:6.1f}%  {name}\n")
            f.write("\nown\n")
            for name, n in own.most_common(80):
                f.write(f"{100 * n / total:6.1f}%  {name}\n")


def main() -> None:
    out, flag, module, *rest = sys.argv[1:]
    assert flag == "-m", "usage: sampler.py OUT -m module args..."
    sampler = Sampler(out)
    signal.signal(signal.SIGUSR1, sampler.start)
    signal.signal(signal.SIGUSR2, sampler.stop)
    threading.Thread(target=sampler.loop, daemon=True, name="sampler").start()
    sys.argv = [module, *rest]
    sys.path.insert(0, os.getcwd())
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
