package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/fleetquota/throttle/providers"
)

// Exit codes; see the package doc.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
	exitConfig  = 3
	exitMoves   = 4
)

func main() {
	// go-redis logs dial failures itself; the command reports every
	// error once, on stderr, in its own words.
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// quietLogger discards go-redis's internal log.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

const usageText = `throttle is the operator's command line of github.com/fleetquota/throttle.

Usage:

	throttle validate [FILE]
	throttle validate --against OLD [FILE]
	throttle status [PROVIDER[/SCOPE]] --redis URL [--all] [--json] [--watch] [--serve ADDR]
	throttle pause PROVIDER[/SCOPE] --for DURATION --redis URL
	throttle resume PROVIDER[/SCOPE] --redis URL
	throttle reset PROVIDER[/LIMIT[/SCOPE]] --redis URL
	throttle proxy --redis URL [--config FILE] [--listen ADDR] [--route NAME=URL]...

Run "throttle COMMAND --help" for a command's flags.
` + exitCodesText

const exitCodesText = `
Exit codes:

	0  success
	1  runtime failure: Redis unreachable or failing, a file that cannot be read
	2  usage error: unknown command or flag, bad argument, unknown provider or limit
	3  invalid configuration: every problem is printed as file:line:column
	4  validate --against: the change would move or forget state in Redis
`

// command is one subcommand.
type command struct {
	name  string
	usage string // the synopsis and description, for --help
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands []*command

func init() {
	commands = []*command{validateCmd, statusCmd, pauseCmd, resumeCmd, resetCmd, proxyCmd}
}

// run runs the command line args (without the program name) and returns
// the exit code. Output goes to stdout, messages to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(args) > 1 {
			for _, c := range commands {
				if c.name == args[1] {
					fmt.Fprint(stdout, c.usage)
					return exitOK
				}
			}
		}
		fmt.Fprint(stdout, usageText)
		return exitOK
	}
	for _, c := range commands {
		if c.name == name {
			return exitCode(c.run(ctx, args[1:], stdout, stderr), stderr)
		}
	}
	fmt.Fprintf(stderr, "throttle: unknown command %q\n\n%s", name, usageText)
	return exitUsage
}

// exitCode prints err (if any) and maps it to an exit code.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, errHelp) {
		return exitOK
	}
	var ue *usageError
	var ce *configError
	switch {
	case errors.Is(err, errMoves):
		// The changes are on stdout.
		fmt.Fprintf(stderr, "throttle: %v\n", err)
		return exitMoves
	case errors.As(err, &ue):
		if !ue.printed {
			fmt.Fprintf(stderr, "throttle: %v\n", ue.err)
		}
		return exitUsage
	case errors.As(err, &ce):
		var pe *providers.ConfigError
		if errors.As(ce.err, &pe) {
			// One problem per line, file:line:column first, for editors
			// and scripts.
			for _, p := range pe.Problems {
				fmt.Fprintln(stderr, p.String())
			}
			if pe.More > 0 {
				fmt.Fprintln(stderr, pe.MoreLine())
			}
			n := len(pe.Problems) + pe.More
			fmt.Fprintf(stderr, "throttle: invalid configuration: %d problem%s\n", n, plural(n))
			return exitConfig
		}
		fmt.Fprintf(stderr, "throttle: %v\n", ce.err)
		return exitConfig
	}
	fmt.Fprintf(stderr, "throttle: %v\n", err)
	return exitFailure
}

// errHelp is returned by a command that printed its help as asked.
var errHelp = errors.New("help")

// errMoves is returned by validate --against when the change would move
// or forget state: exit code 4.
var errMoves = errors.New("the new configuration moves or forgets state in Redis (listed above)")

// usageError is a bad command line: exit code 2.
type usageError struct {
	err     error
	printed bool // the flag package already said what was wrong
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// configError is an invalid configuration: exit code 3.
type configError struct{ err error }

func (e *configError) Error() string { return e.err.Error() }
func (e *configError) Unwrap() error { return e.err }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// newFlagSet returns a FlagSet that reports nothing itself: parse says
// what went wrong and prints help.
func newFlagSet(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parse parses args with flags and positional arguments in any order ("--"
// ends the flags). It prints help for -h/--help and returns errHelp.
func parse(c *command, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) ([]string, error) {
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			printHelp(c, fs, stdout)
			return nil, errHelp
		}
		if err != nil {
			fmt.Fprintf(stderr, "throttle %s: %v\n", c.name, err)
			fmt.Fprintf(stderr, "Run \"throttle %s --help\" for usage.\n", c.name)
			return nil, &usageError{err: err, printed: true}
		}
		rest := fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func printHelp(c *command, fs *flag.FlagSet, w io.Writer) {
	fmt.Fprint(w, c.usage)
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprint(w, exitCodesText)
}

// splitTarget splits "a/b/c" into at most n parts; the last part keeps any
// further "/" (a scope value may hold one).
func splitTarget(s string, n int) []string {
	return strings.SplitN(s, "/", n)
}
