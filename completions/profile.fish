# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_profile_global_optspecs
    string join \n h/help V/version
end

function __fish_profile_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_profile_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_profile_using_subcommand
    set -l cmd (__fish_profile_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c profile -n "__fish_profile_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c profile -n "__fish_profile_needs_command" -s V -l version -d 'Print version'
complete -c profile -n "__fish_profile_needs_command" -f -a "record" -d 'Sample a running process or a command and write a recording'
complete -c profile -n "__fish_profile_needs_command" -f -a "report" -d 'Read a recording: top functions, folded stacks, flame graphs'
complete -c profile -n "__fish_profile_needs_command" -f -a "top" -d 'A live view: the functions and threads with the most CPU time, refreshed'
complete -c profile -n "__fish_profile_needs_command" -f -a "diff" -d 'Compare two profiles; fail on a statistically significant regression'
complete -c profile -n "__fish_profile_needs_command" -f -a "dump" -d 'Print every thread\'s stack now, with its state, without stopping the process'
complete -c profile -n "__fish_profile_needs_command" -f -a "generate" -d 'Generate shell completions or man pages (for packagers)'
complete -c profile -n "__fish_profile_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c profile -n "__fish_profile_using_subcommand record" -s p -l pid -d 'Attach to every thread of these running processes (comma-separated, as perf takes them: -p 4242,4243); reports root each process\'s stacks at its name and pid' -r
complete -c profile -n "__fish_profile_using_subcommand record" -s t -l tid -d 'Attach to these threads only (comma-separated tids, as perf takes them): only their samples are kept, not those of threads they start' -r
complete -c profile -n "__fish_profile_using_subcommand record" -s d -l duration -d 'Stop after this many seconds (fractions allowed, e.g. 2.5). Default: until Ctrl-C, SIGTERM or the target exits. A launched command still running then is sent SIGTERM' -r
complete -c profile -n "__fish_profile_using_subcommand record" -s F -l frequency -d 'Samples per second of each thread\'s CPU time (-F 1000: one sample per 1 ms of CPU). Default: 99; 19 for a host agent (-a --push), as fleet profilers sample' -r
complete -c profile -n "__fish_profile_using_subcommand record" -s c -l count -d 'A sample every NS nanoseconds of each thread\'s CPU time, instead of -F (perf\'s -c: -c 1000000 is -F 1000)' -r
complete -c profile -n "__fish_profile_using_subcommand record" -s o -l output -d 'Write the recording here. Default: profile.prof; with --push, no file unless -o is given' -r -F
complete -c profile -n "__fish_profile_using_subcommand record" -l call-graph -d 'How to take user stacks: `dwarf` (copy the stack and unwind it with CFI: whole stacks without frame pointers), `dwarf,SIZE` (copying SIZE bytes, as perf writes it), or `fp` (frame pointers: cheaper; a stack that leaves code built without them ends at a `[truncated: ...]` frame)' -r
complete -c profile -n "__fish_profile_using_subcommand record" -l stack-size -d 'Bytes of user stack copied per sample for DWARF unwinding, 8..=64512 (rounded up to a multiple of 8; a whole sample record must fit the kernel\'s 64 KiB record limit). Default: 32768' -r
complete -c profile -n "__fish_profile_using_subcommand record" -l mmap-pages -d 'Ring-buffer data pages per CPU (a power of two). Default: chosen from the mode and the locked-memory limit' -r
complete -c profile -n "__fish_profile_using_subcommand record" -l children -d 'With --pid: also record the processes they start after attach (their children, and theirs); `--children=all` also attaches to the ones already running at attach (a server\'s existing workers), the whole process tree. Default: only the attached processes, and a note names the running descendants left out. A launched COMMAND is always followed into every process it starts' -r -f -a "new\t'The processes started after attach (what `--children` alone means)'
all\t'Those and the descendants already running at attach: the whole process tree'"
complete -c profile -n "__fish_profile_using_subcommand record" -l debug-dir -d 'Also look for separate debug info here (DIR/.build-id/xx/yyyy.debug or DIR/NAME.debug); /usr/lib/debug and the target\'s own are always searched' -r -F
complete -c profile -n "__fish_profile_using_subcommand record" -l runtime-memory -d 'MiB the runtime readers (Python, Java) may keep of what they read from one process (code objects, line tables, methods, names); four times that, and at least 128, across every process recorded. Past it, what was used least recently is let go and read again when met. A process\'s memory is another user\'s to shape: see docs/security.md. Default: 32' -r
complete -c profile -n "__fish_profile_using_subcommand record" -l tables-memory -d 'With `-a` and `--push` or windows (the host agent): MiB the symbol and unwind tables of the programs it names, and their parsed names, may take, half each. Past it the least recently used program\'s tables go and are read again when a sample needs them; one that does not fit is not read in that window (its frames are named by file and offset). Local users choose their binaries\' sizes: see docs/security.md. Default: 256' -r
complete -c profile -n "__fish_profile_using_subcommand record" -l push -d 'Stream the profile to a Pyroscope-compatible server (Grafana Pyroscope, Grafana Cloud, Grafana Alloy\'s pyroscope.receive_http): one pprof profile per --push-interval to URL/ingest, for as long as recording runs. http:// or https:// (the server\'s certificate verified against the machine\'s CA bundle, or --push-ca). A user and password in the URL are sent as basic authentication. A server that is down delays nothing: windows queue (ten minutes\' worth) and are retried. With --push-format otlp, an OpenTelemetry OTLP/HTTP receiver instead (http://HOST:4318; URL/v1development/profiles). See docs/continuous.md' -r
complete -c profile -n "__fish_profile_using_subcommand record" -l push-format -d 'The protocol of --push: `pyroscope` (Pyroscope\'s /ingest, pprof bodies) or `otlp` (OTLP/HTTP profiles, protobuf, for the OpenTelemetry Collector and OTLP receivers; docs/otlp.md). Default: pyroscope' -r -f -a "pyroscope\t'Pyroscope\'s HTTP ingest (pprof)'
otlp\t'OTLP/HTTP profiles (protobuf)'"
complete -c profile -n "__fish_profile_using_subcommand record" -l push-interval -d 'Seconds of samples in each pushed profile (at least 1). Default: 10, as Pyroscope\'s own agents' -r
complete -c profile -n "__fish_profile_using_subcommand record" -l app -d 'The application name the server files profiles under (letters, digits, _ . - /). Default: the target\'s process name. With -a, one series per service instead (--push-rules, else the systemd service, else the executable\'s name), and --app names the processes that are in no systemd service and match no rule' -r
complete -c profile -n "__fish_profile_using_subcommand record" -l push-rules -d 'With -a: a file of rules naming the service each process is pushed under, one `KIND PATTERN SERVICE` a line (KIND: unit, container, pod, exe, cgroup; `*` in PATTERN matches anything; the first matching rule wins). SIGHUP reads it again (a file that does not parse keeps the rules in use) instead of ending the recording. See docs/continuous.md' -r -F
complete -c profile -n "__fish_profile_using_subcommand record" -l push-dry-run -d 'Write what would be sent into DIR instead of sending it: per window and series, NNNNNN-APP.pprof (the gzipped body; NNNNNN-APP.otlp.pb.gz with --push-format otlp) and NNNNNN-APP.query (the request\'s query and labels). For checking labels before pointing at a real server' -r -F
complete -c profile -n "__fish_profile_using_subcommand record" -l tag -d 'A label on every pushed profile, KEY=VALUE (repeatable: --tag env=prod --tag region=eu). `hostname` and `pid` are always added (a tag of that name replaces them); with -a, `hostname` and each service\'s `systemd_unit`, `container_id`, `pod_uid`, and no `pid`. With --push-format otlp, tags are resource attributes' -r
complete -c profile -n "__fish_profile_using_subcommand record" -l push-buffer -d 'Windows kept while the server cannot be reached; when more wait, the oldest are dropped (and counted in the summary). Default: 60, ten minutes at the default interval' -r
complete -c profile -n "__fish_profile_using_subcommand record" -l push-header -d 'An HTTP header sent with every push, \'Name: value\' (repeatable), e.g. \'Authorization: Bearer TOKEN\' or \'X-Scope-OrgID: TENANT\'; @FILE reads one header per line from FILE instead (keeps tokens out of the process list). Values are never printed' -r
complete -c profile -n "__fish_profile_using_subcommand record" -l push-ca -d 'Trust only the CA certificates in this PEM file for an https:// --push URL (a private CA), instead of the machine\'s CA bundle (/etc/ssl/certs/...). There is no way to turn verification off' -r -F
complete -c profile -n "__fish_profile_using_subcommand record" -s a -l all-cpus -d 'Every process on the machine (perf\'s -a): each CPU sampled every 1/HZ s of its time, whoever runs on it, processes started meanwhile included; reports root stacks at each process\'s name and pid. Needs root or CAP_PERFMON, or perf_event_paranoid <= 0'
complete -c profile -n "__fish_profile_using_subcommand record" -s g -d 'Take call graphs in the default mode (perf\'s -g; profile always takes them, so this changes nothing: see --call-graph)'
complete -c profile -n "__fish_profile_using_subcommand record" -l no-jvm-perfmap -d 'Do not ask HotSpot JVMs for their perf map. By default a recorded process that maps libjvm.so (JDK 17+) is asked, as `jcmd PID Compiler.perfmap` asks it, to write /tmp/perf-PID.map at attach, every few seconds and at the end, so that Java frames get method names and whole stacks: see docs/runtimes.md'
complete -c profile -n "__fish_profile_using_subcommand record" -l user -d 'Under sudo: run COMMAND as the user who ran sudo (SUDO_UID and SUDO_GID, with that user\'s groups) while profile keeps root\'s privileges to record; the recording is made theirs. Without it COMMAND runs as root'
complete -c profile -n "__fish_profile_using_subcommand record" -l off-cpu -d 'Also record every interval each thread spends off the CPU, with the stack where it left the CPU and why (runnable, sleep, wait, lock, io, other), so reports show every thread\'s whole wall time: see docs/off-cpu.md'
complete -c profile -n "__fish_profile_using_subcommand record" -l exact-weights -d 'Weigh each sample by its own thread\'s CPU time since its previous sample (a count in every sample, Linux 6.12+) and vary the period of threads created while recording. Costs the target a slower context switch (+50% on a ping-pong of two threads): see docs/accounting.md. Without it each sample weighs its period, never more in all than its thread\'s own clock; totals are each thread\'s own clock either way'
complete -c profile -n "__fish_profile_using_subcommand record" -l jvm-flags -d 'With a launched COMMAND: add `-XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit` to JAVA_TOOL_OPTIONS (keeping what it holds), so that every JVM the command starts writes its whole perf map when it exits, and code it compiled after profile\'s last request (a short run, a JVM that exits before the recording ends) is named too; with --no-jvm-perfmap (or a JVM started with -XX:+DisableAttachMechanism) the map it writes at exit is the only one. profile says so when it starts, and the JVM prints `Picked up JAVA_TOOL_OPTIONS`. See docs/runtimes.md'
complete -c profile -n "__fish_profile_using_subcommand record" -s q -l quiet -d 'Print nothing but errors (no status line, no summary)'
complete -c profile -n "__fish_profile_using_subcommand record" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c profile -n "__fish_profile_using_subcommand report" -s i -l input -d 'The recording to read: profile\'s, or a perf.data file from `perf record` (task-clock, cpu-clock or cycles samples; dwarf stacks are unwound, fp and kernel callchains taken as recorded; binaries found by build-id)' -r -F
complete -c profile -n "__fish_profile_using_subcommand report" -l folded -d 'Write folded stacks (`root;...;leaf COUNT` per line, COUNT in samples) here; `-` is stdout. In an off-CPU recording COUNT is nanoseconds of wall time, and an off-CPU stack ends in an `[off-cpu: STATE]` frame' -r -F
complete -c profile -n "__fish_profile_using_subcommand report" -l flamegraph -d 'Write an SVG flame graph here; `-` is stdout. Widths are CPU time; native code is red, inlined functions aqua, kernel orange, JIT green, Python purple. In an off-CPU recording widths are wall time and `[off-cpu: STATE]` frames are shades of blue' -r -F
complete -c profile -n "__fish_profile_using_subcommand report" -l pprof -d 'Write a gzipped pprof profile (profile.proto) here, for `go tool pprof`, Pyroscope, Parca, Grafana; `-` is stdout' -r -F
complete -c profile -n "__fish_profile_using_subcommand report" -l otlp -d 'Write an OpenTelemetry profile (OTLP Profiles, protobuf ProfilesData of profiles/v1development) here, for the OpenTelemetry Collector and OTLP receivers; `-` is stdout. docs/otlp.md tells the mapping' -r -F
complete -c profile -n "__fish_profile_using_subcommand report" -l speedscope -d 'Write a speedscope JSON file (one profile per thread) here, for speedscope.app; `-` is stdout' -r -F
complete -c profile -n "__fish_profile_using_subcommand report" -l json -d 'Print the top table\'s data as JSON, with totals, threads and recording metadata; `--json=PATH` writes it to a file. In an off-CPU recording each thread has `states`: nanoseconds per state' -r -F
complete -c profile -n "__fish_profile_using_subcommand report" -l timeline -d 'Write an SVG timeline here: one row per thread, time across, each stretch coloured by the thread\'s state (an off-CPU recording), or its CPU samples (CPU-only); hover for the function at the top of the stack' -r -F
complete -c profile -n "__fish_profile_using_subcommand report" -l top -d 'Print the N functions with the most self CPU time (the default output, N = 20, when no other output goes to stdout); limits --json too' -r
complete -c profile -n "__fish_profile_using_subcommand report" -l min-width -d 'Merge flame graph frames narrower than this percentage of the total into one frame per parent (narrower merged frames are left out)' -r
complete -c profile -n "__fish_profile_using_subcommand report" -l title -d 'Flame graph title (default: `profile: COMMAND`)' -r
complete -c profile -n "__fish_profile_using_subcommand report" -l thread -d 'Keep only samples of the threads with this name or tid (repeatable)' -r
complete -c profile -n "__fish_profile_using_subcommand report" -l time -d 'Keep only samples taken in this window, in seconds from the start of the recording: START..END, START.. or ..END' -r
complete -c profile -n "__fish_profile_using_subcommand report" -l include -d 'Keep only samples with a frame whose name matches this regular expression anywhere (repeatable: any of them). Whole samples are kept, stacks unchanged' -r
complete -c profile -n "__fish_profile_using_subcommand report" -l exclude -d 'Drop samples with a frame whose name matches this regular expression anywhere (repeatable)' -r
complete -c profile -n "__fish_profile_using_subcommand report" -l state -d 'Keep only time in this state (repeatable): running (on CPU), runnable, sleep, wait, lock, io, other. States other than running need an off-CPU recording' -r
complete -c profile -n "__fish_profile_using_subcommand report" -l focus -d 'Keep only samples through this function and start their stacks at it (its outermost call): an exact function name, else a regular expression' -r
complete -c profile -n "__fish_profile_using_subcommand report" -l service -d 'Keep only samples of processes of this service (repeatable): a systemd service\'s name (`nginx` for nginx.service), else the executable\'s name; `kernel` for kernel threads. Recordings made before workloads were recorded have none' -r
complete -c profile -n "__fish_profile_using_subcommand report" -l process -l pid -d 'Keep only samples of the processes with this name (their main thread\'s) or pid (repeatable): one program of a `record -a` or `-p A,B` recording' -r
complete -c profile -n "__fish_profile_using_subcommand report" -l per-thread -d 'Root every stack at its thread\'s name, then its tid (folded, flame graph)'
complete -c profile -n "__fish_profile_using_subcommand report" -l per-process -d 'Root every stack at its process\'s name, then its pid: one tower per process (folded, flame graph). Without it, a recording of several processes (`record -p A,B`, `-a`) roots stacks at their processes\' names only, so that processes of one program (a server\'s workers) merge into one tower. Given explicitly, stacks are rooted at `service NAME` above that: the process\'s service (systemd unit, else executable) when the recording holds workloads'
complete -c profile -n "__fish_profile_using_subcommand report" -l reverse -d 'Merge stacks by the running function (leaf first), callers above it'
complete -c profile -n "__fish_profile_using_subcommand report" -l icicle -l inverted -d 'Draw an icicle graph: roots at the top, stacks growing down'
complete -c profile -n "__fish_profile_using_subcommand report" -l hide-idle -d 'Leave out the threads idle for the whole recording (off the CPU 99.9% of their time and 95% of it in one wait: a pool\'s parked workers, a blocked helper); a note says how many. Off-CPU recordings only'
complete -c profile -n "__fish_profile_using_subcommand report" -l lines -d 'Tell functions apart by source line: `name:LINE` frames'
complete -c profile -n "__fish_profile_using_subcommand report" -s h -l help -d 'Print help'
complete -c profile -n "__fish_profile_using_subcommand top" -s p -l pid -d 'Attach to every thread of these running processes (comma-separated)' -r
complete -c profile -n "__fish_profile_using_subcommand top" -s d -l duration -d 'Stop after this many seconds. Default: until `q`, Ctrl-C, SIGTERM or the target exits' -r
complete -c profile -n "__fish_profile_using_subcommand top" -s F -l frequency -d 'Samples per second of each thread\'s CPU time' -r
complete -c profile -n "__fish_profile_using_subcommand top" -l call-graph -d 'How to take user stacks: `dwarf`, `dwarf,SIZE` or `fp` (as for `record`)' -r
complete -c profile -n "__fish_profile_using_subcommand top" -l interval -d 'Seconds between refreshes (fractions allowed)' -r
complete -c profile -n "__fish_profile_using_subcommand top" -l window -d 'Seconds of the sliding window the table covers (at least one interval)' -r
complete -c profile -n "__fish_profile_using_subcommand top" -l rows -d 'Rows per table without a terminal (a terminal shows as many as fit)' -r
complete -c profile -n "__fish_profile_using_subcommand top" -l children -d 'With --pid: also record the processes they start after attach (their children, and theirs); `--children=all` also attaches to the ones already running at attach (a server\'s existing workers), the whole process tree. Default: only the attached processes, and a note names the running descendants left out. A launched COMMAND is always followed into every process it starts' -r -f -a "new\t'The processes started after attach (what `--children` alone means)'
all\t'Those and the descendants already running at attach: the whole process tree'"
complete -c profile -n "__fish_profile_using_subcommand top" -l debug-dir -d 'Also look for separate debug info here (DIR/.build-id/xx/yyyy.debug or DIR/NAME.debug); /usr/lib/debug and the target\'s own are always searched' -r -F
complete -c profile -n "__fish_profile_using_subcommand top" -l runtime-memory -d 'MiB the runtime readers (Python, Java) may keep of what they read from one process (code objects, line tables, methods, names); four times that, and at least 128, across every process recorded. Past it, what was used least recently is let go and read again when met. A process\'s memory is another user\'s to shape: see docs/security.md. Default: 32' -r
complete -c profile -n "__fish_profile_using_subcommand top" -s a -l all-cpus -d 'Every process on the machine (perf\'s -a): each CPU sampled by its own time, functions rooted at their process; `t` shows threads of every process. Needs root, or CAP_PERFMON with perf_event_paranoid <= 0'
complete -c profile -n "__fish_profile_using_subcommand top" -l plain -d 'Print a plain table per interval even on a terminal (what a pipe gets)'
complete -c profile -n "__fish_profile_using_subcommand top" -l off-cpu -d 'Also record time off the CPU: the header shows time by state and functions count their waits (see docs/off-cpu.md)'
complete -c profile -n "__fish_profile_using_subcommand top" -l no-jvm-perfmap -d 'Do not ask HotSpot JVMs for their perf map. By default a recorded process that maps libjvm.so (JDK 17+) is asked, as `jcmd PID Compiler.perfmap` asks it, to write /tmp/perf-PID.map at attach, every few seconds and at the end, so that Java frames get method names and whole stacks: see docs/runtimes.md'
complete -c profile -n "__fish_profile_using_subcommand top" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c profile -n "__fish_profile_using_subcommand diff" -l base -d 'A BASE run; repeat for several runs (their spread is then part of the test)' -r -F
complete -c profile -n "__fish_profile_using_subcommand diff" -l new -d 'A NEW run; repeat for several runs' -r -F
complete -c profile -n "__fish_profile_using_subcommand diff" -l fail-on-regression -d 'Exit with status 3 when a function\'s self or total share (time with --absolute) rose by at least PCT percent of its BASE value and significantly' -r
complete -c profile -n "__fish_profile_using_subcommand diff" -l folded-unit -d 'What the counts of folded inputs are: `samples`, or `ns` of CPU time (as `perf script | inferno-collapse-perf` writes: each stack weighted by its samples\' periods). Default: counts that are all multiples of one period of at least 1,000 are ns of that period, counts all of 100,000 or more with no common period are refused as ambiguous, and anything else is samples' -r -f -a "samples\t'Sample counts'
ns\t'Nanoseconds of CPU time'"
complete -c profile -n "__fish_profile_using_subcommand diff" -l folded-period -d 'With --folded-unit ns: the sampling period in ns (e.g. 1001001 for perf\'s task-clock at -F 999). Default: the greatest common divisor of the counts' -r
complete -c profile -n "__fish_profile_using_subcommand diff" -l alpha -d 'Family-wise false-alarm rate over all the rows of one diff (weighted Holm)' -r
complete -c profile -n "__fish_profile_using_subcommand diff" -l min-share -d 'Functions under this percentage of CPU on both sides are shown but not tested' -r
complete -c profile -n "__fish_profile_using_subcommand diff" -l format -d 'How to print the comparison' -r -f -a "table\t'An aligned table for a terminal'
markdown\t'Markdown for a pull-request comment'
json\t'JSON for scripts'"
complete -c profile -n "__fish_profile_using_subcommand diff" -s o -l output -d 'Write the comparison here instead of stdout' -r -F
complete -c profile -n "__fish_profile_using_subcommand diff" -l top -d 'Rows of the full table (--verbose, and markdown\'s): every regression, then the largest changes up to N' -r
complete -c profile -n "__fish_profile_using_subcommand diff" -l flamegraph -d 'Write a differential flame graph of NEW here (red: more CPU in NEW than in BASE)' -r -F
complete -c profile -n "__fish_profile_using_subcommand diff" -l absolute -d 'Compare each function\'s CPU time per run, whatever the machines (the default already does with two recordings or more a side from one kind of machine). Folded files carry sample counts only: they compare in samples, which assumes the same sampling rate on both sides, and cannot be mixed with recordings'
complete -c profile -n "__fish_profile_using_subcommand diff" -l shares -d 'Compare each function\'s share of its run\'s CPU, even when CPU times are comparable (work that moved between functions, not work added). The whole run\'s CPU time is still compared'
complete -c profile -n "__fish_profile_using_subcommand diff" -s v -l verbose -d 'Print the full table (up to --top rows), the method and each inconclusive row\'s advice; the default prints the verdict, the rows that decide it and a summary. Markdown always holds the full table, under <details>'
complete -c profile -n "__fish_profile_using_subcommand diff" -l fail-if-inconclusive -d 'Exit with status 4 when no function regressed but some function above --min-share was inconclusive: the runs had too few samples (or too few runs) to see a rise of the --fail-on-regression threshold. Without it such a diff exits 0 and says INCONCLUSIVE'
complete -c profile -n "__fish_profile_using_subcommand diff" -l gate-kernel -d 'Let kernel functions (`_[k]`) fail the gate too. By default a rise in one is at most "slower": a process\'s kernel time follows the machine (interrupts, scheduling) as much as the program, and a program\'s own extra system calls still show in the total of the user function that makes them'
complete -c profile -n "__fish_profile_using_subcommand diff" -l compare-interrupts -d 'Compare time under an interrupt entry (x86-64 `asm_sysvec_*`, `asm_common_interrupt`; arm64 `el0_interrupt`, `el1_interrupt`, `*_handle_irq`) as the functions it passes through. By default it is the machine\'s, not the program\'s: it is left out of every function\'s row and of both sides\' shares, and shown on a line of its own, so that a runner\'s load does not move every share. System calls and page faults are compared either way'
complete -c profile -n "__fish_profile_using_subcommand diff" -l json -d 'Print JSON (the same as --format json)'
complete -c profile -n "__fish_profile_using_subcommand diff" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c profile -n "__fish_profile_using_subcommand dump" -s p -l pid -d 'The process to dump (a thread id dumps its whole process)' -r
complete -c profile -n "__fish_profile_using_subcommand dump" -l debug-dir -d 'Also look for separate debug info here (DIR/.build-id/xx/yyyy.debug or DIR/NAME.debug); /usr/lib/debug and the target\'s own are always searched' -r -F
complete -c profile -n "__fish_profile_using_subcommand dump" -l json -d 'Write JSON (every thread, its state, kernel stack and frames) instead of text'
complete -c profile -n "__fish_profile_using_subcommand dump" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c profile -n "__fish_profile_using_subcommand generate" -s h -l help -d 'Print help'
complete -c profile -n "__fish_profile_using_subcommand help; and not __fish_seen_subcommand_from record report top diff dump generate help" -f -a "record" -d 'Sample a running process or a command and write a recording'
complete -c profile -n "__fish_profile_using_subcommand help; and not __fish_seen_subcommand_from record report top diff dump generate help" -f -a "report" -d 'Read a recording: top functions, folded stacks, flame graphs'
complete -c profile -n "__fish_profile_using_subcommand help; and not __fish_seen_subcommand_from record report top diff dump generate help" -f -a "top" -d 'A live view: the functions and threads with the most CPU time, refreshed'
complete -c profile -n "__fish_profile_using_subcommand help; and not __fish_seen_subcommand_from record report top diff dump generate help" -f -a "diff" -d 'Compare two profiles; fail on a statistically significant regression'
complete -c profile -n "__fish_profile_using_subcommand help; and not __fish_seen_subcommand_from record report top diff dump generate help" -f -a "dump" -d 'Print every thread\'s stack now, with its state, without stopping the process'
complete -c profile -n "__fish_profile_using_subcommand help; and not __fish_seen_subcommand_from record report top diff dump generate help" -f -a "generate" -d 'Generate shell completions or man pages (for packagers)'
complete -c profile -n "__fish_profile_using_subcommand help; and not __fish_seen_subcommand_from record report top diff dump generate help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
