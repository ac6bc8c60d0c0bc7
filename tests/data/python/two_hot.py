# A target for tests/it/top_runtimes.rs: one thread that runs two hot Python
# functions in turn, spending its time in the eval loop (small integers, no
# allocation to speak of), until killed or 10 minutes have passed. Prints "ready"
# once its first round is done.
import sys
import time


def churn_alpha():
    x = 0
    for _ in range(60000):
        x = (x * 3 + 1) & 255
    return x


def churn_beta():
    x = 0
    for _ in range(30000):
        x = (x * 5 + 3) & 255
    return x


end = time.monotonic() + 600
churn_alpha()
churn_beta()
print("ready", flush=True)
while time.monotonic() < end:
    churn_alpha()
    churn_beta()
