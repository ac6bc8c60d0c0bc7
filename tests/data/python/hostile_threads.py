"""A process hostile to a profiler that reads it from outside (issue 44): four
threads spin in Python, then, with argv[1] "cyclic", the interpreter's thread list is
made to loop with ctypes (its head, the last thread started, made its own next), so
that the main thread and three spinning threads can no longer be reached by a walk
of the list; with "plain" it is left as it is. argv[2]: a file whose existence stops
it (the list is mended first). Prints "ready" once the threads spin."""

import ctypes
import os
import sys
import threading
import time

mode, stop = sys.argv[1], sys.argv[2]
done = False


def spin():
    x = 0
    while not done:
        x = (x + 1) % 1000003


threads = [threading.Thread(target=spin, name=f"spin{i}") for i in range(4)]
for t in threads:
    t.start()
time.sleep(0.2)

api = ctypes.pythonapi
api.PyInterpreterState_Get.restype = ctypes.c_void_p
api.PyInterpreterState_ThreadHead.restype = ctypes.c_void_p
api.PyInterpreterState_ThreadHead.argtypes = [ctypes.c_void_p]
head = api.PyInterpreterState_ThreadHead(api.PyInterpreterState_Get())
# PyThreadState starts with its prev and next pointers in 3.8 to 3.13.
nxt = ctypes.c_void_p.from_address(head + 8)
saved = nxt.value
if mode == "cyclic":
    nxt.value = head
print("ready", flush=True)
while not os.path.exists(stop):
    time.sleep(0.05)
nxt.value = saved
done = True
for t in threads:
    t.join()
