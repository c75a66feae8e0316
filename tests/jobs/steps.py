"""A tiny stand-in trainer for patrol tests: its behaviour is chosen by argv."""

import os
import signal
import sys
import time

mode = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
print(f"pid {os.getpid()} mode {mode}", flush=True)


def on_term(_sig: int, _frame: object) -> None:
    print("SIGTERM received, checkpointing", flush=True)
    if mode == "slow-term":
        time.sleep(30)  # longer than the preemption grace: SIGKILL follows
    sys.exit(143)


signal.signal(signal.SIGTERM, on_term)
for i in range(1, steps + 1):
    if mode == "nan" and i == 4:
        print(f"step {i}/{steps} loss nan lr 0.0003", flush=True)
    else:
        print(f"step {i}/{steps} loss {1.0 / i:.4f} lr 0.0003", flush=True)
    if mode == "stall" and i == 2:
        time.sleep(3600)
    if mode == "hang-after" and i == int(os.environ.get("HANG_AT", "8")):
        time.sleep(3600)
    if mode == "cuda-crash" and i == 2:
        print("Traceback (most recent call last):", flush=True)
        print('  File "train.py", line 42, in <module>', flush=True)
        print("    loss.backward()", flush=True)
        print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
        while not os.path.exists("release"):
            time.sleep(0.1)
        sys.exit(1)
    if mode == "cuda-warn" and i == 2:
        print("RuntimeError: CUDA error: an illegal memory access was encountered", flush=True)
    if mode == "fill" and i == 3:
        target = sys.argv[3]
        with open(os.path.join(target, "blob"), "wb") as f:
            while True:
                f.write(b"\0" * (1 << 20))
                f.flush()
    if mode == "hog" and i == 3:
        time.sleep(float(os.environ.get("HOG_DELAY", "0")))
        hog = []
        while True:
            hog.append(bytearray(20 << 20))
            time.sleep(0.02)
    time.sleep(float(os.environ.get("STEP_S", "0.2")))
print("done", flush=True)
