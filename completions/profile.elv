
use builtin;
use str;

set edit:completion:arg-completer[profile] = {|@words|
    fn spaces {|n|
        builtin:repeat $n ' ' | str:join ''
    }
    fn cand {|text desc|
        edit:complex-candidate $text &display=$text' '(spaces (- 14 (wcswidth $text)))$desc
    }
    var command = 'profile'
    for word $words[1..-1] {
        if (str:has-prefix $word '-') {
            break
        }
        set command = $command';'$word
    }
    var completions = [
        &'profile'= {
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
            cand -V 'Print version'
            cand --version 'Print version'
            cand record 'Sample a running process or a command and write a recording'
            cand report 'Read a recording: top functions, folded stacks, flame graphs'
            cand generate 'Generate shell completions or man pages (for packagers)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'profile;record'= {
            cand -p 'Attach to every thread of this running process'
            cand --pid 'Attach to every thread of this running process'
            cand -d 'Stop after this many seconds (fractions allowed, e.g. 2.5). Default: until Ctrl-C, SIGTERM or the target exits. A launched command still running then is sent SIGTERM'
            cand --duration 'Stop after this many seconds (fractions allowed, e.g. 2.5). Default: until Ctrl-C, SIGTERM or the target exits. A launched command still running then is sent SIGTERM'
            cand -F 'Samples per second of each thread''s CPU time (-F 1000: one sample per 1 ms of CPU)'
            cand --frequency 'Samples per second of each thread''s CPU time (-F 1000: one sample per 1 ms of CPU)'
            cand -o 'Write the recording here'
            cand --output 'Write the recording here'
            cand --call-graph 'How to take user stacks'
            cand --stack-size 'Bytes of user stack copied per sample for DWARF unwinding (rounded up to a multiple of 8)'
            cand --mmap-pages 'Ring-buffer data pages per CPU (a power of two). Default: chosen from the mode and the locked-memory limit'
            cand --debug-dir 'Also look for separate debug info here (DIR/.build-id/xx/yyyy.debug or DIR/NAME.debug); /usr/lib/debug and the target''s own are always searched'
            cand -q 'Print nothing but errors (no status line, no summary)'
            cand --quiet 'Print nothing but errors (no status line, no summary)'
            cand -h 'Print help (see more with ''--help'')'
            cand --help 'Print help (see more with ''--help'')'
        }
        &'profile;report'= {
            cand -i 'The recording to read'
            cand --input 'The recording to read'
            cand --folded 'Write folded stacks (`root;...;leaf COUNT` per line) here; `-` is stdout'
            cand --flamegraph 'Write an SVG flame graph here; `-` is stdout'
            cand --top 'Print the N functions with the most CPU time (the default output with no file)'
            cand --per-thread 'Root every stack at its thread''s name, then its tid'
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'profile;generate'= {
            cand -h 'Print help'
            cand --help 'Print help'
        }
        &'profile;help'= {
            cand record 'Sample a running process or a command and write a recording'
            cand report 'Read a recording: top functions, folded stacks, flame graphs'
            cand generate 'Generate shell completions or man pages (for packagers)'
            cand help 'Print this message or the help of the given subcommand(s)'
        }
        &'profile;help;record'= {
        }
        &'profile;help;report'= {
        }
        &'profile;help;generate'= {
        }
        &'profile;help;help'= {
        }
    ]
    $completions[$command]
}
