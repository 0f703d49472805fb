// Package optname is how a library names an option of blockfs in its messages and errors,
// without speaking the command line itself: every option is named by its schema name
// ("cache-size", mount.Schema; pack's own options for pack), and Flag words it as the command
// line does. The Python package words "--cache-size" back as cache_size= from the published
// schema (blockfs options --json), so one message serves both.
package optname

import (
	"errors"
	"fmt"
)

// Flag returns how a message names the option name: "--name".
func Flag(name string) string { return "--" + name }

// Error is an error in the value of one option (Option), or in options that do not go
// together (Option is the one to change). The command line exits 2 on it.
type Error struct {
	Option string // the option's schema name ("cache-size")
	Err    error  // what is wrong, a whole sentence naming the option
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error for option with the message format gives.
func Errorf(option, format string, args ...any) error {
	return &Error{Option: option, Err: fmt.Errorf(format, args...)}
}

// Of returns the option err is about, or "" when it is not an option's error.
func Of(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Option
	}
	return ""
}
