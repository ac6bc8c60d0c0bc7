
using namespace System.Management.Automation
using namespace System.Management.Automation.Language

Register-ArgumentCompleter -Native -CommandName 'profile' -ScriptBlock {
    param($wordToComplete, $commandAst, $cursorPosition)

    $commandElements = $commandAst.CommandElements
    $command = @(
        'profile'
        for ($i = 1; $i -lt $commandElements.Count; $i++) {
            $element = $commandElements[$i]
            if ($element -isnot [StringConstantExpressionAst] -or
                $element.StringConstantType -ne [StringConstantType]::BareWord -or
                $element.Value.StartsWith('-') -or
                $element.Value -eq $wordToComplete) {
                break
        }
        $element.Value
    }) -join ';'

    $completions = @(switch ($command) {
        'profile' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('-V', '-V ', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('--version', '--version', [CompletionResultType]::ParameterName, 'Print version')
            [CompletionResult]::new('record', 'record', [CompletionResultType]::ParameterValue, 'Sample a running process or a command and write a recording')
            [CompletionResult]::new('report', 'report', [CompletionResultType]::ParameterValue, 'Read a recording: top functions, folded stacks, flame graphs')
            [CompletionResult]::new('top', 'top', [CompletionResultType]::ParameterValue, 'A live view: the functions and threads with the most CPU time, refreshed')
            [CompletionResult]::new('diff', 'diff', [CompletionResultType]::ParameterValue, 'Compare two profiles; fail on a statistically significant regression')
            [CompletionResult]::new('dump', 'dump', [CompletionResultType]::ParameterValue, 'Print every thread''s stack now, with its state, without stopping the process')
            [CompletionResult]::new('generate', 'generate', [CompletionResultType]::ParameterValue, 'Generate shell completions or man pages (for packagers)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'profile;record' {
            [CompletionResult]::new('-p', '-p', [CompletionResultType]::ParameterName, 'Attach to every thread of these running processes (comma-separated, as perf takes them: -p 4242,4243); reports root each process''s stacks at its name and pid')
            [CompletionResult]::new('--pid', '--pid', [CompletionResultType]::ParameterName, 'Attach to every thread of these running processes (comma-separated, as perf takes them: -p 4242,4243); reports root each process''s stacks at its name and pid')
            [CompletionResult]::new('-t', '-t', [CompletionResultType]::ParameterName, 'Attach to these threads only (comma-separated tids, as perf takes them): only their samples are kept, not those of threads they start')
            [CompletionResult]::new('--tid', '--tid', [CompletionResultType]::ParameterName, 'Attach to these threads only (comma-separated tids, as perf takes them): only their samples are kept, not those of threads they start')
            [CompletionResult]::new('-d', '-d', [CompletionResultType]::ParameterName, 'Stop after this many seconds (fractions allowed, e.g. 2.5). Default: until Ctrl-C, SIGTERM or the target exits. A launched command still running then is sent SIGTERM')
            [CompletionResult]::new('--duration', '--duration', [CompletionResultType]::ParameterName, 'Stop after this many seconds (fractions allowed, e.g. 2.5). Default: until Ctrl-C, SIGTERM or the target exits. A launched command still running then is sent SIGTERM')
            [CompletionResult]::new('-F', '-F ', [CompletionResultType]::ParameterName, 'Samples per second of each thread''s CPU time (-F 1000: one sample per 1 ms of CPU). Default: 99; 19 for a host agent (-a --push), as fleet profilers sample')
            [CompletionResult]::new('--frequency', '--frequency', [CompletionResultType]::ParameterName, 'Samples per second of each thread''s CPU time (-F 1000: one sample per 1 ms of CPU). Default: 99; 19 for a host agent (-a --push), as fleet profilers sample')
            [CompletionResult]::new('-c', '-c', [CompletionResultType]::ParameterName, 'A sample every NS nanoseconds of each thread''s CPU time, instead of -F (perf''s -c: -c 1000000 is -F 1000)')
            [CompletionResult]::new('--count', '--count', [CompletionResultType]::ParameterName, 'A sample every NS nanoseconds of each thread''s CPU time, instead of -F (perf''s -c: -c 1000000 is -F 1000)')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Write the recording here. Default: profile.prof; with --push, no file unless -o is given')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Write the recording here. Default: profile.prof; with --push, no file unless -o is given')
            [CompletionResult]::new('--call-graph', '--call-graph', [CompletionResultType]::ParameterName, 'How to take user stacks: `dwarf` (copy the stack and unwind it with CFI: whole stacks without frame pointers), `dwarf,SIZE` (copying SIZE bytes, as perf writes it), or `fp` (frame pointers: cheaper; a stack that leaves code built without them ends at a `[truncated: ...]` frame)')
            [CompletionResult]::new('--stack-size', '--stack-size', [CompletionResultType]::ParameterName, 'Bytes of user stack copied per sample for DWARF unwinding, 8..=64512 (rounded up to a multiple of 8; a whole sample record must fit the kernel''s 64 KiB record limit). Default: 32768')
            [CompletionResult]::new('--mmap-pages', '--mmap-pages', [CompletionResultType]::ParameterName, 'Ring-buffer data pages per CPU (a power of two). Default: chosen from the mode and the locked-memory limit')
            [CompletionResult]::new('--children', '--children', [CompletionResultType]::ParameterName, 'With --pid: also record the processes they start after attach (their children, and theirs); `--children=all` also attaches to the ones already running at attach (a server''s existing workers), the whole process tree. Default: only the attached processes, and a note names the running descendants left out. A launched COMMAND is always followed into every process it starts')
            [CompletionResult]::new('--debug-dir', '--debug-dir', [CompletionResultType]::ParameterName, 'Also look for separate debug info here (DIR/.build-id/xx/yyyy.debug or DIR/NAME.debug); /usr/lib/debug and the target''s own are always searched')
            [CompletionResult]::new('--runtime-memory', '--runtime-memory', [CompletionResultType]::ParameterName, 'MiB the runtime readers (Python, Java) may keep of what they read from one process (code objects, line tables, methods, names); four times that, and at least 128, across every process recorded. Past it, what was used least recently is let go and read again when met. A process''s memory is another user''s to shape: see docs/security.md. Default: 32')
            [CompletionResult]::new('--tables-memory', '--tables-memory', [CompletionResultType]::ParameterName, 'With `-a` and `--push` or windows (the host agent): MiB the symbol and unwind tables of the programs it names, and their parsed names, may take, half each. Past it the least recently used program''s tables go and are read again when a sample needs them; one that does not fit is not read in that window (its frames are named by file and offset). Local users choose their binaries'' sizes: see docs/security.md. Default: 256')
            [CompletionResult]::new('--push', '--push', [CompletionResultType]::ParameterName, 'Stream the profile to a Pyroscope-compatible server (Grafana Pyroscope, Grafana Cloud, Grafana Alloy''s pyroscope.receive_http): one pprof profile per --push-interval to URL/ingest, for as long as recording runs. http:// or https:// (the server''s certificate verified against the machine''s CA bundle, or --push-ca). A user and password in the URL are sent as basic authentication. A server that is down delays nothing: windows queue (ten minutes'' worth) and are retried. With --push-format otlp, an OpenTelemetry OTLP/HTTP receiver instead (http://HOST:4318; URL/v1development/profiles). See docs/continuous.md')
            [CompletionResult]::new('--push-format', '--push-format', [CompletionResultType]::ParameterName, 'The protocol of --push: `pyroscope` (Pyroscope''s /ingest, pprof bodies) or `otlp` (OTLP/HTTP profiles, protobuf, for the OpenTelemetry Collector and OTLP receivers; docs/otlp.md). Default: pyroscope')
            [CompletionResult]::new('--push-interval', '--push-interval', [CompletionResultType]::ParameterName, 'Seconds of samples in each pushed profile (at least 1). Default: 10, as Pyroscope''s own agents')
            [CompletionResult]::new('--app', '--app', [CompletionResultType]::ParameterName, 'The application name the server files profiles under (letters, digits, _ . - /). Default: the target''s process name. With -a, one series per service instead (--push-rules, else the systemd service, else the executable''s name), and --app names the processes that are in no systemd service and match no rule')
            [CompletionResult]::new('--push-rules', '--push-rules', [CompletionResultType]::ParameterName, 'With -a: a file of rules naming the service each process is pushed under, one `KIND PATTERN SERVICE` a line (KIND: unit, container, pod, exe, cgroup; `*` in PATTERN matches anything; the first matching rule wins). SIGHUP reads it again (a file that does not parse keeps the rules in use) instead of ending the recording. See docs/continuous.md')
            [CompletionResult]::new('--push-dry-run', '--push-dry-run', [CompletionResultType]::ParameterName, 'Write what would be sent into DIR instead of sending it: per window and series, NNNNNN-APP.pprof (the gzipped body; NNNNNN-APP.otlp.pb.gz with --push-format otlp) and NNNNNN-APP.query (the request''s query and labels). For checking labels before pointing at a real server')
            [CompletionResult]::new('--tag', '--tag', [CompletionResultType]::ParameterName, 'A label on every pushed profile, KEY=VALUE (repeatable: --tag env=prod --tag region=eu). `hostname` and `pid` are always added (a tag of that name replaces them); with -a, `hostname` and each service''s `systemd_unit`, `container_id`, `pod_uid`, and no `pid`. With --push-format otlp, tags are resource attributes')
            [CompletionResult]::new('--push-buffer', '--push-buffer', [CompletionResultType]::ParameterName, 'Windows kept while the server cannot be reached; when more wait, the oldest are dropped (and counted in the summary). Default: 60, ten minutes at the default interval')
            [CompletionResult]::new('--push-header', '--push-header', [CompletionResultType]::ParameterName, 'An HTTP header sent with every push, ''Name: value'' (repeatable), e.g. ''Authorization: Bearer TOKEN'' or ''X-Scope-OrgID: TENANT''; @FILE reads one header per line from FILE instead (keeps tokens out of the process list). Values are never printed')
            [CompletionResult]::new('--push-ca', '--push-ca', [CompletionResultType]::ParameterName, 'Trust only the CA certificates in this PEM file for an https:// --push URL (a private CA), instead of the machine''s CA bundle (/etc/ssl/certs/...). There is no way to turn verification off')
            [CompletionResult]::new('-a', '-a', [CompletionResultType]::ParameterName, 'Every process on the machine (perf''s -a): each CPU sampled every 1/HZ s of its time, whoever runs on it, processes started meanwhile included; reports root stacks at each process''s name and pid. Needs root or CAP_PERFMON, or perf_event_paranoid <= 0')
            [CompletionResult]::new('--all-cpus', '--all-cpus', [CompletionResultType]::ParameterName, 'Every process on the machine (perf''s -a): each CPU sampled every 1/HZ s of its time, whoever runs on it, processes started meanwhile included; reports root stacks at each process''s name and pid. Needs root or CAP_PERFMON, or perf_event_paranoid <= 0')
            [CompletionResult]::new('-g', '-g', [CompletionResultType]::ParameterName, 'Take call graphs in the default mode (perf''s -g; profile always takes them, so this changes nothing: see --call-graph)')
            [CompletionResult]::new('--no-jvm-perfmap', '--no-jvm-perfmap', [CompletionResultType]::ParameterName, 'Never ask HotSpot JVMs for their perf map. By default a JVM is asked (as `jcmd PID Compiler.perfmap` asks it: /tmp/perf-PID.map written at attach, every few seconds and at the end) only if its JIT code cannot be found in its own code heaps: a JDK whose tables profile cannot read, or with --call-graph fp. The others are asked nothing and write nothing: see docs/runtimes.md')
            [CompletionResult]::new('--jvm-perfmap', '--jvm-perfmap', [CompletionResultType]::ParameterName, 'Ask every HotSpot JVM for its perf map (JDK 17+), at attach, every few seconds and at the end, even one whose code heaps profile reads: its stubs and methods are then also named as the map names them where the code heaps could not be read in time')
            [CompletionResult]::new('--user', '--user', [CompletionResultType]::ParameterName, 'Under sudo: run COMMAND as the user who ran sudo (SUDO_UID and SUDO_GID, with that user''s groups) while profile keeps root''s privileges to record; the recording is made theirs. Without it COMMAND runs as root')
            [CompletionResult]::new('--off-cpu', '--off-cpu', [CompletionResultType]::ParameterName, 'Also record every interval each thread spends off the CPU, with the stack where it left the CPU and why (runnable, sleep, wait, lock, io, other), so reports show every thread''s whole wall time: see docs/off-cpu.md')
            [CompletionResult]::new('--exact-weights', '--exact-weights', [CompletionResultType]::ParameterName, 'Weigh each sample by its own thread''s CPU time since its previous sample (a count in every sample, Linux 6.12+) and vary the period of threads created while recording. Costs the target a slower context switch (+50% on a ping-pong of two threads): see docs/accounting.md. Without it each sample weighs its period, never more in all than its thread''s own clock; totals are each thread''s own clock either way')
            [CompletionResult]::new('--jvm-flags', '--jvm-flags', [CompletionResultType]::ParameterName, 'With a launched COMMAND: add `-XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit` to JAVA_TOOL_OPTIONS (keeping what it holds), so that every JVM the command starts writes its whole perf map when it exits, and code it compiled after profile''s last request (a short run, a JVM that exits before the recording ends) is named too; with --no-jvm-perfmap (or a JVM started with -XX:+DisableAttachMechanism) the map it writes at exit is the only one. profile says so when it starts, and the JVM prints `Picked up JAVA_TOOL_OPTIONS`. See docs/runtimes.md')
            [CompletionResult]::new('-q', '-q', [CompletionResultType]::ParameterName, 'Print nothing but errors (no status line, no summary)')
            [CompletionResult]::new('--quiet', '--quiet', [CompletionResultType]::ParameterName, 'Print nothing but errors (no status line, no summary)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'profile;report' {
            [CompletionResult]::new('-i', '-i', [CompletionResultType]::ParameterName, 'The recording to read: profile''s, or a perf.data file from `perf record` (task-clock, cpu-clock or cycles samples; dwarf stacks are unwound, fp and kernel callchains taken as recorded; binaries found by build-id)')
            [CompletionResult]::new('--input', '--input', [CompletionResultType]::ParameterName, 'The recording to read: profile''s, or a perf.data file from `perf record` (task-clock, cpu-clock or cycles samples; dwarf stacks are unwound, fp and kernel callchains taken as recorded; binaries found by build-id)')
            [CompletionResult]::new('--folded', '--folded', [CompletionResultType]::ParameterName, 'Write folded stacks (`root;...;leaf COUNT` per line, COUNT in samples) here; `-` is stdout. In an off-CPU recording COUNT is nanoseconds of wall time, and an off-CPU stack ends in an `[off-cpu: STATE]` frame')
            [CompletionResult]::new('--flamegraph', '--flamegraph', [CompletionResultType]::ParameterName, 'Write an SVG flame graph here; `-` is stdout. Widths are CPU time; native code is red, inlined functions aqua, kernel orange, JIT green, Python purple. In an off-CPU recording widths are wall time and `[off-cpu: STATE]` frames are shades of blue')
            [CompletionResult]::new('--pprof', '--pprof', [CompletionResultType]::ParameterName, 'Write a gzipped pprof profile (profile.proto) here, for `go tool pprof`, Pyroscope, Parca, Grafana; `-` is stdout. Locations carry their source line numbers where the debug info (or the runtime) gives them, so `go tool pprof -list FUNCTION` and `-lines` work; functions stay whole unless --lines')
            [CompletionResult]::new('--otlp', '--otlp', [CompletionResultType]::ParameterName, 'Write an OpenTelemetry profile (OTLP Profiles, protobuf ProfilesData of profiles/v1development) here, for the OpenTelemetry Collector and OTLP receivers; `-` is stdout. docs/otlp.md tells the mapping')
            [CompletionResult]::new('--speedscope', '--speedscope', [CompletionResultType]::ParameterName, 'Write a speedscope JSON file (one profile per thread) here, for speedscope.app; `-` is stdout')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print the top table''s data as JSON, with totals, threads and recording metadata; `--json=PATH` writes it to a file. In an off-CPU recording each thread has `states`: nanoseconds per state')
            [CompletionResult]::new('--timeline', '--timeline', [CompletionResultType]::ParameterName, 'Write an SVG timeline here: one row per thread, time across, each stretch coloured by the thread''s state (an off-CPU recording), or its CPU samples (CPU-only); hover for the function at the top of the stack')
            [CompletionResult]::new('--top', '--top', [CompletionResultType]::ParameterName, 'Print the N functions with the most self CPU time (the default output, N = 20, when no other output goes to stdout); limits --json too')
            [CompletionResult]::new('--min-width', '--min-width', [CompletionResultType]::ParameterName, 'Merge flame graph frames narrower than this percentage of the total into one frame per parent (narrower merged frames are left out)')
            [CompletionResult]::new('--title', '--title', [CompletionResultType]::ParameterName, 'Flame graph title (default: `profile: COMMAND`)')
            [CompletionResult]::new('--thread', '--thread', [CompletionResultType]::ParameterName, 'Keep only samples of the threads with this name or tid (repeatable)')
            [CompletionResult]::new('--time', '--time', [CompletionResultType]::ParameterName, 'Keep only samples taken in this window, in seconds from the start of the recording: START..END, START.. or ..END')
            [CompletionResult]::new('--include', '--include', [CompletionResultType]::ParameterName, 'Keep only samples with a frame whose name matches this regular expression anywhere (repeatable: any of them). Whole samples are kept, stacks unchanged')
            [CompletionResult]::new('--exclude', '--exclude', [CompletionResultType]::ParameterName, 'Drop samples with a frame whose name matches this regular expression anywhere (repeatable)')
            [CompletionResult]::new('--state', '--state', [CompletionResultType]::ParameterName, 'Keep only time in this state (repeatable): running (on CPU), runnable, sleep, wait, lock, io, other. States other than running need an off-CPU recording')
            [CompletionResult]::new('--focus', '--focus', [CompletionResultType]::ParameterName, 'Keep only samples through this function and start their stacks at it (its outermost call): an exact function name, else a regular expression')
            [CompletionResult]::new('--service', '--service', [CompletionResultType]::ParameterName, 'Keep only samples of processes of this service (repeatable): a systemd service''s name (`nginx` for nginx.service), else the executable''s name; `kernel` for kernel threads. Recordings made before workloads were recorded have none')
            [CompletionResult]::new('--process', '--process', [CompletionResultType]::ParameterName, 'Keep only samples of the processes with this name (their main thread''s) or pid (repeatable): one program of a `record -a` or `-p A,B` recording')
            [CompletionResult]::new('--pid', '--pid', [CompletionResultType]::ParameterName, 'Keep only samples of the processes with this name (their main thread''s) or pid (repeatable): one program of a `record -a` or `-p A,B` recording')
            [CompletionResult]::new('--no-source-lines', '--no-source-lines', [CompletionResultType]::ParameterName, 'Leave source line numbers out of --pprof and --otlp (smaller files; a location''s functions are kept). Conflicts with --lines')
            [CompletionResult]::new('--per-thread', '--per-thread', [CompletionResultType]::ParameterName, 'Root every stack at its thread''s name, then its tid (folded, flame graph)')
            [CompletionResult]::new('--per-process', '--per-process', [CompletionResultType]::ParameterName, 'Root every stack at its process''s name, then its pid: one tower per process (folded, flame graph). Without it, a recording of several processes (`record -p A,B`, `-a`) roots stacks at their processes'' names only, so that processes of one program (a server''s workers) merge into one tower. Given explicitly, stacks are rooted at `service NAME` above that: the process''s service (systemd unit, else executable) when the recording holds workloads')
            [CompletionResult]::new('--reverse', '--reverse', [CompletionResultType]::ParameterName, 'Merge stacks by the running function (leaf first), callers above it')
            [CompletionResult]::new('--icicle', '--icicle', [CompletionResultType]::ParameterName, 'Draw an icicle graph: roots at the top, stacks growing down')
            [CompletionResult]::new('--inverted', '--inverted', [CompletionResultType]::ParameterName, 'Draw an icicle graph: roots at the top, stacks growing down')
            [CompletionResult]::new('--hide-idle', '--hide-idle', [CompletionResultType]::ParameterName, 'Leave out the threads idle for the whole recording (off the CPU 99.9% of their time and 95% of it in one wait: a pool''s parked workers, a blocked helper); a note says how many. Off-CPU recordings only')
            [CompletionResult]::new('--lines', '--lines', [CompletionResultType]::ParameterName, 'Tell functions apart by source line: `name:LINE` frames')
            [CompletionResult]::new('--runtime-only', '--runtime-only', [CompletionResultType]::ParameterName, 'The runtimes'' view: in a stack with a Python, Java or JIT frame, the native frames before the first one stay and every native or kernel frame after it (the interpreter''s internals, a C extension, a system call) is folded into the runtime frame that called it, as py-spy shows a program by default. Stacks of native code alone are kept whole')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'profile;top' {
            [CompletionResult]::new('-p', '-p', [CompletionResultType]::ParameterName, 'Attach to every thread of these running processes (comma-separated)')
            [CompletionResult]::new('--pid', '--pid', [CompletionResultType]::ParameterName, 'Attach to every thread of these running processes (comma-separated)')
            [CompletionResult]::new('-d', '-d', [CompletionResultType]::ParameterName, 'Stop after this many seconds. Default: until `q`, Ctrl-C, SIGTERM or the target exits')
            [CompletionResult]::new('--duration', '--duration', [CompletionResultType]::ParameterName, 'Stop after this many seconds. Default: until `q`, Ctrl-C, SIGTERM or the target exits')
            [CompletionResult]::new('-F', '-F ', [CompletionResultType]::ParameterName, 'Samples per second of each thread''s CPU time')
            [CompletionResult]::new('--frequency', '--frequency', [CompletionResultType]::ParameterName, 'Samples per second of each thread''s CPU time')
            [CompletionResult]::new('--call-graph', '--call-graph', [CompletionResultType]::ParameterName, 'How to take user stacks: `dwarf`, `dwarf,SIZE` or `fp` (as for `record`)')
            [CompletionResult]::new('--interval', '--interval', [CompletionResultType]::ParameterName, 'Seconds between refreshes (fractions allowed)')
            [CompletionResult]::new('--window', '--window', [CompletionResultType]::ParameterName, 'Seconds of the sliding window the table covers (at least one interval)')
            [CompletionResult]::new('--rows', '--rows', [CompletionResultType]::ParameterName, 'Rows per table without a terminal (a terminal shows as many as fit)')
            [CompletionResult]::new('--view', '--view', [CompletionResultType]::ParameterName, 'The table shown (the only one in plain tables; `t` turns to the next on a terminal)')
            [CompletionResult]::new('--children', '--children', [CompletionResultType]::ParameterName, 'With --pid: also record the processes they start after attach (their children, and theirs); `--children=all` also attaches to the ones already running at attach (a server''s existing workers), the whole process tree. Default: only the attached processes, and a note names the running descendants left out. A launched COMMAND is always followed into every process it starts')
            [CompletionResult]::new('--debug-dir', '--debug-dir', [CompletionResultType]::ParameterName, 'Also look for separate debug info here (DIR/.build-id/xx/yyyy.debug or DIR/NAME.debug); /usr/lib/debug and the target''s own are always searched')
            [CompletionResult]::new('--runtime-memory', '--runtime-memory', [CompletionResultType]::ParameterName, 'MiB the runtime readers (Python, Java) may keep of what they read from one process (code objects, line tables, methods, names); four times that, and at least 128, across every process recorded. Past it, what was used least recently is let go and read again when met. A process''s memory is another user''s to shape: see docs/security.md. Default: 32')
            [CompletionResult]::new('-a', '-a', [CompletionResultType]::ParameterName, 'Every process on the machine (perf''s -a): each CPU sampled by its own time, functions rooted at their process; `t` shows threads of every process. Needs root, or CAP_PERFMON with perf_event_paranoid <= 0')
            [CompletionResult]::new('--all-cpus', '--all-cpus', [CompletionResultType]::ParameterName, 'Every process on the machine (perf''s -a): each CPU sampled by its own time, functions rooted at their process; `t` shows threads of every process. Needs root, or CAP_PERFMON with perf_event_paranoid <= 0')
            [CompletionResult]::new('--plain', '--plain', [CompletionResultType]::ParameterName, 'Print a plain table per interval even on a terminal (what a pipe gets)')
            [CompletionResult]::new('--runtime-only', '--runtime-only', [CompletionResultType]::ParameterName, 'The runtimes'' view (as `report --runtime-only`): the native and kernel frames under a Python, Java or JIT frame count as that frame''s own time, so the program''s functions lead the table rather than the interpreter''s internals')
            [CompletionResult]::new('--off-cpu', '--off-cpu', [CompletionResultType]::ParameterName, 'Also record time off the CPU: the header shows time by state and functions count their waits (see docs/off-cpu.md)')
            [CompletionResult]::new('--no-jvm-perfmap', '--no-jvm-perfmap', [CompletionResultType]::ParameterName, 'Never ask HotSpot JVMs for their perf map. By default a JVM is asked (as `jcmd PID Compiler.perfmap` asks it: /tmp/perf-PID.map written at attach, every few seconds and at the end) only if its JIT code cannot be found in its own code heaps: a JDK whose tables profile cannot read, or with --call-graph fp. The others are asked nothing and write nothing: see docs/runtimes.md')
            [CompletionResult]::new('--jvm-perfmap', '--jvm-perfmap', [CompletionResultType]::ParameterName, 'Ask every HotSpot JVM for its perf map (JDK 17+), at attach, every few seconds and at the end, even one whose code heaps profile reads: its stubs and methods are then also named as the map names them where the code heaps could not be read in time')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'profile;diff' {
            [CompletionResult]::new('--base', '--base', [CompletionResultType]::ParameterName, 'A BASE run; repeat for several runs (their spread is then part of the test)')
            [CompletionResult]::new('--new', '--new', [CompletionResultType]::ParameterName, 'A NEW run; repeat for several runs')
            [CompletionResult]::new('--fail-on-regression', '--fail-on-regression', [CompletionResultType]::ParameterName, 'Exit with status 3 when a function''s self or total share (time with --absolute) rose by at least PCT percent of its BASE value and significantly')
            [CompletionResult]::new('--folded-unit', '--folded-unit', [CompletionResultType]::ParameterName, 'What the counts of folded inputs are: `samples`, or `ns` of CPU time (as `perf script | inferno-collapse-perf` writes: each stack weighted by its samples'' periods). Default: counts that are all multiples of one period of at least 1,000 are ns of that period, counts all of 100,000 or more with no common period are refused as ambiguous, and anything else is samples')
            [CompletionResult]::new('--folded-period', '--folded-period', [CompletionResultType]::ParameterName, 'With --folded-unit ns: the sampling period in ns (e.g. 1001001 for perf''s task-clock at -F 999). Default: the greatest common divisor of the counts')
            [CompletionResult]::new('--alpha', '--alpha', [CompletionResultType]::ParameterName, 'Family-wise false-alarm rate over all the rows of one diff (weighted Holm)')
            [CompletionResult]::new('--min-share', '--min-share', [CompletionResultType]::ParameterName, 'Functions under this percentage of CPU on both sides are shown but not tested')
            [CompletionResult]::new('--format', '--format', [CompletionResultType]::ParameterName, 'How to print the comparison')
            [CompletionResult]::new('-o', '-o', [CompletionResultType]::ParameterName, 'Write the comparison here instead of stdout')
            [CompletionResult]::new('--output', '--output', [CompletionResultType]::ParameterName, 'Write the comparison here instead of stdout')
            [CompletionResult]::new('--top', '--top', [CompletionResultType]::ParameterName, 'Rows of the full table (--verbose, and markdown''s): every regression, then the largest changes up to N')
            [CompletionResult]::new('--flamegraph', '--flamegraph', [CompletionResultType]::ParameterName, 'Write a differential flame graph of NEW here (red: more CPU in NEW than in BASE)')
            [CompletionResult]::new('--absolute', '--absolute', [CompletionResultType]::ParameterName, 'Compare each function''s CPU time per run, whatever the machines (the default already does with two recordings or more a side from one kind of machine). Folded files carry sample counts only: they compare in samples, which assumes the same sampling rate on both sides, and cannot be mixed with recordings')
            [CompletionResult]::new('--shares', '--shares', [CompletionResultType]::ParameterName, 'Compare each function''s share of its run''s CPU, even when CPU times are comparable (work that moved between functions, not work added). The whole run''s CPU time is still compared')
            [CompletionResult]::new('-v', '-v', [CompletionResultType]::ParameterName, 'Print the full table (up to --top rows), the method and each inconclusive row''s advice; the default prints the verdict, the rows that decide it and a summary. Markdown always holds the full table, under <details>')
            [CompletionResult]::new('--verbose', '--verbose', [CompletionResultType]::ParameterName, 'Print the full table (up to --top rows), the method and each inconclusive row''s advice; the default prints the verdict, the rows that decide it and a summary. Markdown always holds the full table, under <details>')
            [CompletionResult]::new('--fail-if-inconclusive', '--fail-if-inconclusive', [CompletionResultType]::ParameterName, 'Exit with status 4 when no function regressed but some function above --min-share was inconclusive: the runs had too few samples (or too few runs) to see a rise of the --fail-on-regression threshold. Without it such a diff exits 0 and says INCONCLUSIVE')
            [CompletionResult]::new('--gate-kernel', '--gate-kernel', [CompletionResultType]::ParameterName, 'Let kernel functions (`_[k]`) fail the gate too. By default a rise in one is at most "slower": a process''s kernel time follows the machine (interrupts, scheduling) as much as the program, and a program''s own extra system calls still show in the total of the user function that makes them')
            [CompletionResult]::new('--compare-interrupts', '--compare-interrupts', [CompletionResultType]::ParameterName, 'Compare time under an interrupt entry (x86-64 `asm_sysvec_*`, `asm_common_interrupt`; arm64 `el0_interrupt`, `el1_interrupt`, `*_handle_irq`) as the functions it passes through. By default it is the machine''s, not the program''s: it is left out of every function''s row and of both sides'' shares, and shown on a line of its own, so that a runner''s load does not move every share. System calls and page faults are compared either way')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Print JSON (the same as --format json)')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'profile;dump' {
            [CompletionResult]::new('-p', '-p', [CompletionResultType]::ParameterName, 'The process to dump (a thread id dumps its whole process)')
            [CompletionResult]::new('--pid', '--pid', [CompletionResultType]::ParameterName, 'The process to dump (a thread id dumps its whole process)')
            [CompletionResult]::new('--debug-dir', '--debug-dir', [CompletionResultType]::ParameterName, 'Also look for separate debug info here (DIR/.build-id/xx/yyyy.debug or DIR/NAME.debug); /usr/lib/debug and the target''s own are always searched')
            [CompletionResult]::new('--json', '--json', [CompletionResultType]::ParameterName, 'Write JSON (every thread, its state, kernel stack and frames) instead of text')
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help (see more with ''--help'')')
            break
        }
        'profile;generate' {
            [CompletionResult]::new('-h', '-h', [CompletionResultType]::ParameterName, 'Print help')
            [CompletionResult]::new('--help', '--help', [CompletionResultType]::ParameterName, 'Print help')
            break
        }
        'profile;help' {
            [CompletionResult]::new('record', 'record', [CompletionResultType]::ParameterValue, 'Sample a running process or a command and write a recording')
            [CompletionResult]::new('report', 'report', [CompletionResultType]::ParameterValue, 'Read a recording: top functions, folded stacks, flame graphs')
            [CompletionResult]::new('top', 'top', [CompletionResultType]::ParameterValue, 'A live view: the functions and threads with the most CPU time, refreshed')
            [CompletionResult]::new('diff', 'diff', [CompletionResultType]::ParameterValue, 'Compare two profiles; fail on a statistically significant regression')
            [CompletionResult]::new('dump', 'dump', [CompletionResultType]::ParameterValue, 'Print every thread''s stack now, with its state, without stopping the process')
            [CompletionResult]::new('generate', 'generate', [CompletionResultType]::ParameterValue, 'Generate shell completions or man pages (for packagers)')
            [CompletionResult]::new('help', 'help', [CompletionResultType]::ParameterValue, 'Print this message or the help of the given subcommand(s)')
            break
        }
        'profile;help;record' {
            break
        }
        'profile;help;report' {
            break
        }
        'profile;help;top' {
            break
        }
        'profile;help;diff' {
            break
        }
        'profile;help;dump' {
            break
        }
        'profile;help;generate' {
            break
        }
        'profile;help;help' {
            break
        }
    })

    $completions.Where{ $_.CompletionText -like "$wordToComplete*" } |
        Sort-Object -Property ListItemText
}
