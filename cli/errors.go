package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// Exit codes of the muster command. They are part of the CLI contract:
// scripts branch on them, so keep the numbers stable and keep
// exitCodesHelp, the README and this list in step.
const (
	// ExitOK: the command did what was asked.
	ExitOK = 0
	// ExitInvalid: a definition is invalid, or any error without a more
	// precise code.
	ExitInvalid = 1
	// ExitUsage: bad flags or arguments, or an input file that cannot be
	// read or parsed.
	ExitUsage = 2
	// ExitNotFound: the workload, the type or the definition asked for
	// does not exist.
	ExitNotFound = 3
	// ExitNoDefinition: the type exists but no definition describes it.
	ExitNoDefinition = 4
	// ExitUnreachable: no cluster is configured or it cannot be reached.
	ExitUnreachable = 5
)

// exitCodesHelp is appended to the root command's help.
const exitCodesHelp = `Exit codes:
  0  success
  1  invalid definition, or another error
  2  usage error, or an input file that cannot be read or parsed
  3  workload, type or definition not found
  4  the type has no definition (neither embedded nor in the cluster)
  5  no cluster configured, or the cluster cannot be reached
  130 interrupted (Ctrl-C): requests in flight are cancelled at once`

// ExitError is an error with the exit code the command should end with.
// Commands return it from RunE; Main prints its message as one
// "error: …" line and exits with Code.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode returns the code the process should exit with for err: the code
// of the outermost *ExitError in its chain, ExitInvalid for any other
// error, ExitOK for nil.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return ExitInvalid
}

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return err
	}
	return &ExitError{Code: code, Err: err}
}

func usageErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

func notFoundErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitNotFound, Err: fmt.Errorf(format, args...)}
}

func noDefinitionErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitNoDefinition, Err: fmt.Errorf(format, args...)}
}

// NoDefinitionReport is what -o json|yaml prints on standard output when
// the type asked for has no definition: a script reads the answer where it
// reads results, and the "error: …" line still goes to standard error.
type NoDefinitionReport struct {
	// Error is always "NoDefinition".
	Error string `json:"error"`
	// Type is the TYPE as given, when one was.
	Type string `json:"type,omitempty"`
	// Kind and Group name the kind, when it is known.
	Kind    string `json:"kind,omitempty"`
	Group   string `json:"group,omitempty"`
	Message string `json:"message"`
	Hint    string `json:"hint"`
}

const noDefinitionHint = `"muster definitions" lists the types muster knows; add a definition for this one as a Karta ("muster validate" checks it)`

// noDefinitionError carries the kind that has no definition.
type noDefinitionError struct {
	kind, group string
	msg         string
}

func (e *noDefinitionError) Error() string { return e.msg }

// reportNoDefinition prints the structured form of a no-definition error
// for -o json|yaml and returns err unchanged, so the exit code and the
// stderr line stay as they are.
func reportNoDefinition(w io.Writer, format, typeArg string, err error) error {
	if (format != "json" && format != "yaml") || ExitCode(err) != ExitNoDefinition {
		return err
	}
	r := NoDefinitionReport{Error: "NoDefinition", Type: typeArg, Message: oneLine(err.Error()), Hint: noDefinitionHint}
	var nd *noDefinitionError
	if errors.As(err, &nd) {
		r.Kind, r.Group = nd.kind, nd.group
	}
	if perr := printData(w, format, r); perr != nil {
		return errors.Join(err, perr)
	}
	return err
}

func invalidErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitInvalid, Err: fmt.Errorf(format, args...)}
}

func unreachableErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitUnreachable, Err: fmt.Errorf(format, args...)}
}

// oneLine folds a multi-line message into one line so that "error: …" stays
// one line whatever a library put in its error text.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return strings.Join(fields, "; ")
}
