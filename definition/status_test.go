package definition

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
)

const statusKarta = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: st}
spec:
  structureDefinition:
    rootComponent:
      name: app
      kind: {group: example.com, version: v1, kind: App}
      statusDefinition:
        phaseDefinition: {path: .status.phase}
        conditionsDefinition: {path: .status.conds, typeFieldName: kind, statusFieldName: ok, reasonFieldName: why}
        statusMappings:
          initializing: [{byPhase: pending}]
          running:
            - {byPhase: Running, byConditions: [{type: Ready, status: "True"}]}
            - byExpression: {expression: .status.active, expectedResult: "3"}
          failed: [{byConditions: [{type: Failed, status: "True", reason: Crash}]}]
          degraded: [{byConditions: [{type: Ready, status: "False"}]}]
          suspended: [{byExpression: {expression: ".spec.suspend // false", expectedResult: "true"}}]
          completed: [{byConditions: [{type: Complete, status: ""}]}]
          resuming: [{byExpression: {expression: ".spec.steps[]?", expectedResult: "resume"}}]
`

func TestStatus(t *testing.T) {
	tests := []struct {
		name   string
		status string
		want   []kartav1alpha1.ResourceStatus
		phase  string
	}{
		{"nothing matches", "status: {}", []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusUndefined}, ""},
		{"phase case-insensitive", "status: {phase: Pending}", []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusInitializing}, "Pending"},
		{"phase and condition both needed", "status: {phase: Running}", []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusUndefined}, "Running"},
		{"phase and condition, boolean status", "status: {phase: Running, conds: [{kind: Ready, ok: true}]}", []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusRunning}, "Running"},
		{"second matcher ORed", "status: {active: 3}", []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusRunning}, ""},
		{"reason must match", "status: {conds: [{kind: Failed, ok: 'True', why: OOM}]}", []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusUndefined}, ""},
		{"several statuses in Workload Map's order", "spec: {suspend: true}\nstatus: {conds: [{kind: Failed, ok: 'True', why: Crash}, {kind: Ready, ok: 'False'}]}",
			[]kartav1alpha1.ResourceStatus{kartav1alpha1.StatusFailed, kartav1alpha1.StatusDegraded, kartav1alpha1.StatusSuspended}, ""},
		{"transitions come last in the list", "spec: {suspend: true, steps: [resume]}\nstatus: {active: 3}",
			[]kartav1alpha1.ResourceStatus{kartav1alpha1.StatusRunning, kartav1alpha1.StatusSuspended, kartav1alpha1.StatusResuming}, ""},
		{"an empty expected status is not compared", "status: {conds: [{kind: Complete, ok: 'False'}]}", []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusCompleted}, ""},
		{"only the expression's first value counts", "spec: {steps: [pause, resume]}", []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusUndefined}, ""},
		{"the last condition of a type is compared", "status: {conds: [{kind: Ready, ok: 'False'}, {kind: Ready, ok: 'True'}]}", []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusUndefined}, ""},
		{"no status at all", "", []kartav1alpha1.ResourceStatus{kartav1alpha1.StatusUndefined}, ""},
	}
	c := compileT(t, statusKarta)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := c.Status(ctxT, objT(t, "apiVersion: example.com/v1\nkind: App\nmetadata: {name: a}\n"+tc.status))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, st.Statuses); diff != "" {
				t.Errorf("statuses (-want, +got):\n%s", diff)
			}
			if st.Phase != tc.phase {
				t.Errorf("phase %q, want %q", st.Phase, tc.phase)
			}
		})
	}
}

// TestStatusPrimary: the list keeps Workload Map's order, the primary phase
// is the one the workload is in.
func TestStatusPrimary(t *testing.T) {
	S := func(s ...kartav1alpha1.ResourceStatus) []kartav1alpha1.ResourceStatus { return s }
	const (
		ini  = kartav1alpha1.StatusInitializing
		run  = kartav1alpha1.StatusRunning
		done = kartav1alpha1.StatusCompleted
		fail = kartav1alpha1.StatusFailed
		deg  = kartav1alpha1.StatusDegraded
		susp = kartav1alpha1.StatusSuspended
		res  = kartav1alpha1.StatusResuming
		und  = kartav1alpha1.StatusUndefined
	)
	tests := []struct {
		statuses, byPrecedence []kartav1alpha1.ResourceStatus
		primary                kartav1alpha1.ResourceStatus
	}{
		{S(und), S(und), und},
		{S(ini, run), S(run, ini), run},
		{S(ini, done), S(done, ini), done},
		{S(ini, fail), S(fail, ini), fail},
		{S(ini, susp), S(susp, ini), susp},
		{S(run, deg), S(run, deg), run},
		{S(run, susp, res), S(res, run, susp), res},
		{nil, S(und), und},
	}
	for _, tc := range tests {
		st := &Status{Statuses: tc.statuses}
		if got := st.Primary(); got != tc.primary {
			t.Errorf("%v: primary %s, want %s", tc.statuses, got, tc.primary)
		}
		if diff := cmp.Diff(tc.byPrecedence, st.ByPrecedence()); diff != "" {
			t.Errorf("%v: by precedence (-want, +got):\n%s", tc.statuses, diff)
		}
	}
}

func TestStatusConditionsAndErrors(t *testing.T) {
	c := compileT(t, statusKarta)
	st, err := c.Status(ctxT, objT(t, "apiVersion: v1\nkind: App\nmetadata: {name: a}\nstatus: {conds: [{kind: Ready, ok: 'True', why: Fine, message: hi}]}"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Condition{{Type: "Ready", Status: "True", Reason: "Fine", Message: "hi"}}, st.Conditions); diff != "" {
		t.Errorf("conditions (-want, +got):\n%s", diff)
	}
	_, err = c.Status(ctxT, objT(t, "apiVersion: v1\nkind: App\nmetadata: {name: a}\nstatus: {conds: [1]}"))
	if err == nil || !strings.Contains(err.Error(), "conditionsDefinition.path") {
		t.Fatalf("error = %v", err)
	}
	// The jobset definition reads its conditions with default field names.
	js := compileT(t, jobsetDef)
	st, err = js.Status(ctxT, objT(t, jobsetObj))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]kartav1alpha1.ResourceStatus{kartav1alpha1.StatusRunning}, st.Statuses); diff != "" {
		t.Errorf("jobset statuses (-want, +got):\n%s", diff)
	}
	// Without a statusDefinition, always Undefined.
	st, err = compileT(t, minimal).Status(ctxT, objT(t, jobsetObj))
	if err != nil || len(st.Statuses) != 1 || st.Statuses[0] != kartav1alpha1.StatusUndefined {
		t.Fatalf("got %v %v", st, err)
	}
}
