// A fake HotSpot JVM for the tests of issue 26 (root among hostile users): it maps a
// file named libjvm.so and speaks enough of the attach protocol (SIGQUIT with a
// .attach_pid<PID> file -> a listener at /tmp/.java_pid<PID>; a request -> "0\n" and a
// perf map at /tmp/perf-<PID>.map). Run as an unprivileged user, it plays the attacker.
//
// Usage: fakejvm DIR MODE [ARG]   (DIR holds the libjvm.so to map; LOG is DIR/log)
//   answer        answer every request with a small map
//   grow N        write N lines with fresh names at every request
//   drip          reply one byte every 2.5 s until the peer leaves; log how long
//   silent        catch SIGQUIT, never listen
//   impostor PID  listen at /tmp/.java_pid<PID> (another process's socket); log what
//                 a client sends
//   reuser        no JVM: catch SIGQUIT and log it with its sender; log a .attach_pid
//                 file in the cwd
//   jit ADDR      run `jmp .` in anonymous code at ADDR (hex), for ever
// Like HotSpot, it has a thread named "Signal Dispatch" (the recorder signals only a
// JVM that has one). It prints "ready" once set up. SIGTERM ends it, removing its
// socket and map.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t quit_seen, term_seen, quit_from;
static char sock_path[108], map_path[64], log_path[4096];

static void on_quit(int s) { (void)s; quit_seen++; }
static void on_quit_info(int s, siginfo_t *i, void *c) {
    (void)s, (void)c;
    quit_from = i->si_pid;
    quit_seen++;
}
static void on_term(int s) { (void)s; term_seen = 1; }

static void logf_(const char *fmt, ...) {
    FILE *f = fopen(log_path, "a");
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

// The pid of the process at the other end of an accepted connection.
static long peer_pid(int c) {
    struct ucred cr;
    socklen_t len = sizeof cr;
    return getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) ? -1 : (long)cr.pid;
}

static long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int listen_at(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    strncpy(a.sun_path, path, sizeof a.sun_path - 1);
    unlink(path);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 8)) {
        perror("listen");
        exit(2);
    }
    chmod(path, 0600);
    return fd;
}

// Reads the request: five NUL-terminated strings, or until the peer leaves.
static long read_request(int c) {
    char buf[256];
    long got = 0, nuls = 0;
    while (nuls < 5) {
        ssize_t n = read(c, buf, sizeof buf);
        if (n <= 0) break;
        got += n;
        for (ssize_t i = 0; i < n; i++) nuls += buf[i] == 0;
    }
    return got;
}

static unsigned generation;

static void write_map(long lines) {
    char tmp[80];
    snprintf(tmp, sizeof tmp, "%s.tmp", map_path);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    generation++;
    for (long i = 0; i < lines; i++)
        fprintf(f, "%lx 10 void Fresh.g%u_m%08ld_padding_to_make_the_names_long(java.lang.String)\n",
                0x7f0000000000UL + (unsigned long)generation * 0x10000000UL +
                    (unsigned long)i * 0x10,
                generation, i);
    fclose(f);
    rename(tmp, map_path);
}

// HotSpot's thread that handles SIGQUIT; the recorder signals only a JVM that has it.
static void *signal_dispatcher(void *arg) {
    (void)arg;
    for (;;) pause();
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *dir = argv[1], *mode = argv[2];
    pid_t me = getpid();
    snprintf(log_path, sizeof log_path, "%s/log", dir);
    snprintf(sock_path, sizeof sock_path, "/tmp/.java_pid%d", (int)me);
    snprintf(map_path, sizeof map_path, "/tmp/perf-%d.map", (int)me);
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, 0);

    if (!strcmp(mode, "jit")) {
        uintptr_t at = strtoul(argv[3], 0, 16);
        unsigned char *p = mmap((void *)at, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED || (uintptr_t)p != at) return 3;
        p[0] = 0xeb;  // jmp .
        p[1] = 0xfe;
        printf("ready\n");
        fflush(stdout);
        ((void (*)(void))p)();
        return 0;
    }

    sa.sa_handler = on_quit;
    sigaction(SIGQUIT, &sa, 0);
    pthread_t dispatcher;
    if (pthread_create(&dispatcher, 0, signal_dispatcher, 0) == 0)
        pthread_setname_np(dispatcher, "Signal Dispatch");

    if (!strcmp(mode, "reuser")) {
        // Who sent SIGQUIT (on a shared machine, another user's recorder may).
        struct sigaction si = {.sa_sigaction = on_quit_info, .sa_flags = SA_SIGINFO};
        sigaction(SIGQUIT, &si, 0);
        char trigger[64];
        snprintf(trigger, sizeof trigger, ".attach_pid%d", (int)me);
        logf_("reuser %ld", (long)me);
        printf("ready\n");
        fflush(stdout);
        while (!term_seen) {
            if (quit_seen) {
                logf_("got signal 3 from %ld", (long)quit_from);
                quit_seen = 0;
            }
            if (access(trigger, F_OK) == 0) logf_("trigger file %ld", (long)me);
            usleep(5000);
        }
        return 0;
    }

    if (!strcmp(mode, "impostor")) {
        char path[108];
        snprintf(path, sizeof path, "/tmp/.java_pid%s", argv[3]);
        int l = listen_at(path);
        printf("ready\n");
        fflush(stdout);
        while (!term_seen) {
            struct pollfd p = {.fd = l, .events = POLLIN};
            if (poll(&p, 1, 100) <= 0) continue;
            int c = accept(l, 0, 0);
            if (c < 0) continue;
            long from = peer_pid(c);
            logf_("impostor received %ld bytes from %ld", read_request(c), from);
            close(c);
        }
        unlink(path);
        return 0;
    }

    // A JVM: map a file named libjvm.so, executable.
    char jvm[4096];
    snprintf(jvm, sizeof jvm, "%s/libjvm.so", dir);
    int fd = open(jvm, O_RDONLY);
    if (fd < 0 || mmap(0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED) {
        perror(jvm);
        return 2;
    }
    close(fd);
    long lines = argc > 3 ? atol(argv[3]) : 0;
    int l = -1;
    printf("ready\n");
    fflush(stdout);
    while (!term_seen) {
        if (quit_seen) {
            quit_seen = 0;
            char t1[4200], t2[64];
            snprintf(t1, sizeof t1, ".attach_pid%d", (int)me);
            snprintf(t2, sizeof t2, "/tmp/.attach_pid%d", (int)me);
            if (l < 0 && strcmp(mode, "silent") &&
                (access(t1, F_OK) == 0 || access(t2, F_OK) == 0))
                l = listen_at(sock_path);
        }
        if (l < 0) {
            usleep(20000);
            continue;
        }
        struct pollfd p = {.fd = l, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0) continue;
        int c = accept(l, 0, 0);
        if (c < 0) continue;
        read_request(c);
        if (!strcmp(mode, "drip")) {
            long start = now_ms(), from = peer_pid(c);
            while (!term_seen && write(c, "0", 1) == 1) usleep(2500000);
            logf_("dripped for %ld ms to %ld", now_ms() - start, from);
        } else {
            write_map(strcmp(mode, "grow") ? 3 : lines);
            if (write(c, "0\n", 2) != 2) logf_("reply failed %d", errno);
            logf_("answered %u", generation);
        }
        close(c);
    }
    if (l >= 0) unlink(sock_path);
    unlink(map_path);
    return 0;
}
