package jq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Limits bound one run besides the fixed budget (MaxEvalSteps,
// MaxEvalBytes).
type Limits struct {
	// Timeout bounds the run's wall time.
	Timeout time.Duration
	// MaxResults caps the values it may yield.
	MaxResults int
}

// ErrTimeout is in the error of a run that did not end within
// Limits.Timeout. Unlike the step and byte budgets it depends on the
// machine's load.
var ErrTimeout = errors.New("did not finish within")

var errTooManyResults = errors.New("too many results")

// ErrIteratedNull is the error of a run that iterated over null: jq's
// "cannot iterate over: null", from .spec.groups[].name on an object
// without groups. Where a definition lists a component's instances, that is
// an absent list (no instances), as Workload Map reads it. gojq exports no
// type for it; TestIteratedNull pins the message.
var ErrIteratedNull = errors.New("cannot iterate over: null")

// deadlineCtx is the deadline of one evaluation. context.WithTimeout
// starts a timer per evaluation, which cost more than running a short
// expression; gojq asks Done before every instruction, so Done itself looks
// at the clock every deadlineCheckEvery calls instead. An evaluation runs
// on one goroutine, which is the only user of its deadlineCtx.
type deadlineCtx struct {
	context.Context
	deadline time.Time
	calls    uint32
	expired  bool
	// cause is why the evaluation stopped: the deadline or the step budget.
	cause error
	// budget is charged by the guards of budget.go, which find it
	// because Run passes this deadlineCtx as the value of budgetVar.
	budget budget
	// vars is set only for an expression that reads the caller's
	// variables (one pointer here keeps every other evaluation's
	// allocation as it was).
	vars *varRun
}

const deadlineCheckEvery = 256

// closedDone is the Done channel of an expired deadlineCtx.
var closedDone = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

func newDeadlineCtx(parent context.Context, timeout time.Duration) *deadlineCtx {
	return &deadlineCtx{Context: parent, deadline: time.Now().Add(timeout)}
}

func (d *deadlineCtx) Deadline() (time.Time, bool) {
	if pd, ok := d.Context.Deadline(); ok && pd.Before(d.deadline) {
		return pd, true
	}
	return d.deadline, true
}

func (d *deadlineCtx) Done() <-chan struct{} {
	if !d.expired {
		d.calls++
		switch {
		case d.calls > MaxEvalSteps:
			d.expired, d.cause = true, errSteps
		case d.budget.charge(stepBytes) != nil:
			d.expired, d.cause = true, errBytes
		case d.calls%deadlineCheckEvery == 0 && !time.Now().Before(d.deadline):
			d.expired, d.cause = true, context.DeadlineExceeded
		}
	}
	if d.expired {
		return closedDone
	}
	return d.Context.Done()
}

func (d *deadlineCtx) Err() error {
	if d.expired {
		return d.cause
	}
	return d.Context.Err()
}

// Run evaluates e on input (in the value form Value returns) under lim and
// the budget, and returns every value it yields. vars binds the caller's
// variables; nil binds none (each reads null). A run that read an
// unresolved variable fails with an *UnresolvedError, whatever else
// happened; other errors are capped to a readable length, since an
// expression builds its own error message.
func (e *Expr) Run(ctx context.Context, input any, lim Limits, vars *Vars) ([]any, error) {
	dl := newDeadlineCtx(ctx, lim.Timeout)
	if e.vars && vars != nil {
		dl.vars = &varRun{vars: vars}
	}
	iter := e.code.RunWithContext(dl, input, dl)
	var out []any
	for {
		v, ok := iter.Next()
		if !ok {
			if ue := dl.vars.unresolvedError(); ue != nil {
				return nil, ue
			}
			return out, nil
		}
		if err, ok := v.(error); ok {
			// An error after a read of an unresolved variable may come
			// from its null (error("not defined") in a fallback): the
			// missing value is the cause to report.
			if ue := dl.vars.unresolvedError(); ue != nil {
				return nil, ue
			}
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("%w %v; simplify the expression", ErrTimeout, lim.Timeout)
			}
			if err.Error() == ErrIteratedNull.Error() {
				return nil, ErrIteratedNull
			}
			return nil, capMessage(err)
		}
		if len(out) >= lim.MaxResults {
			return nil, fmt.Errorf("%w: more than %d values", errTooManyResults, lim.MaxResults)
		}
		out = append(out, v)
	}
}

// maxMessage caps the message of a run's error: error("x" * 1000000) is a
// message of a megabyte, and it ends up in events, conditions and the
// CLI's output.
const maxMessage = 512

func capMessage(err error) error {
	msg := err.Error()
	if len(msg) <= maxMessage {
		return err
	}
	return fmt.Errorf("%s… (%d bytes)", strings.ToValidUTF8(msg[:maxMessage], ""), len(msg))
}
