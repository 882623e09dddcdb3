package definition

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	kartav1alpha1 "github.com/muster-io/muster/api/v1alpha1"
	"github.com/muster-io/muster/definition/jq"
)

// Defaults of Options. The timeout guards against runaway expressions; it
// is not a latency goal: a label lookup takes microseconds, but a starved
// goroutine on a loaded node can wait far longer than that for a CPU.
const (
	DefaultTimeout    = time.Second
	DefaultMaxResults = 10000
)

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxResults <= 0 {
		o.MaxResults = DefaultMaxResults
	}
	if len(o.GPUResourceNames) == 0 {
		o.GPUResourceNames = DefaultGPUResourceNames
	}
	return o
}

// component is one compiled component.
type component struct {
	def      *kartav1alpha1.ComponentDefinition
	name     string
	fp       *field.Path
	parent   int // index in Compiled.comps; -1 for the root
	depth    int
	children []int
	kind     *schema.GroupVersionKind
	hasPods  bool

	instanceID                         *expr
	replicas, minReplicas, maxReplicas *expr
	spec                               specExprs

	// Pod selector, run on the pod.
	typeSelector bool
	typeKey      *expr
	typeValue    *string
	matchLabels  map[string]string
	instanceSel  *expr
	replicaSel   *expr
}

// specExprs are the compiled paths of a specDefinition.
type specExprs struct {
	podTemplateSpec *expr
	podSpec         *expr
	metadata        *expr
	frag            *fragExprs
	// writes are where write-back puts the scheduler name, labels and
	// annotations of the component's templates.
	writes [numWriteKinds]writeTarget
}

type fragExprs struct {
	schedulerName, labels, annotations, resources, resourceClaims,
	podAffinity, nodeAffinity, containers, container, priorityClassName,
	image *expr
}

// Compile validates k and compiles every expression once. The error, when
// validation fails, is a *ValidationError listing every problem. The
// returned *Compiled is safe for concurrent use.
func Compile(k *kartav1alpha1.Karta, opts Options) (*Compiled, error) {
	c, errs := build(k, opts)
	if len(errs) > 0 {
		name := ""
		if k != nil {
			name = k.Name
		}
		return nil, newValidationError(name, errs)
	}
	return c, nil
}

// Validate checks k and returns every problem with its field path. A
// definition that validates compiles: Validate compiles every expression
// too, so that a jq typo (an unknown function) is found here.
func Validate(k *kartav1alpha1.Karta) field.ErrorList {
	_, errs := build(k, Options{})
	return errs
}

// builder collects the errors of one compilation.
type builder struct {
	c    *Compiled
	errs field.ErrorList
	// refVars are the names of the declared references (read as $name),
	// which every root-side expression may read.
	refVars []string
}

func (b *builder) add(errs ...*field.Error) { b.errs = append(b.errs, errs...) }

// compileExpr parses, checks and compiles one jq expression. A missing
// required expression, a parse error, a banned construct or a compile error
// is reported against fp; the result is then nil.
func (b *builder) compileExpr(fp *field.Path, src string, required bool) *expr {
	if src == "" {
		if required {
			b.add(field.Required(fp, "a jq expression is required"))
		}
		return nil
	}
	e, fe := compileJQVars(fp, src, b.refVars)
	if fe != nil {
		b.add(fe)
		return nil
	}
	return e
}

// podExpr compiles an expression that runs on a pod. It cannot read the
// references: what a pod matches is remembered per pod, not per binding.
func (b *builder) podExpr(fp *field.Path, src string, required bool) *expr {
	vars := b.refVars
	b.refVars = nil
	defer func() { b.refVars = vars }()
	return b.compileExpr(fp, src, required)
}

func (b *builder) optExpr(fp *field.Path, src *string) *expr {
	if src == nil {
		return nil
	}
	if *src == "" {
		b.add(field.Required(fp, "a jq expression is required when the field is set"))
		return nil
	}
	return b.compileExpr(fp, *src, true)
}

func compileJQ(fp *field.Path, src string) (*expr, *field.Error) {
	return compileJQVars(fp, src, nil)
}

// compileJQVars compiles src with the reference variables vars (names
// without $) in scope.
func compileJQVars(fp *field.Path, src string, vars []string) (*expr, *field.Error) {
	code, err := jq.Compile(src, vars)
	if err != nil {
		return nil, compileError(fp, src, err)
	}
	e := &expr{field: fp.String(), src: src, code: code}
	e.keys, e.simple = code.ConstPath()
	e.pod = podFieldOf(e.keys, e.simple)
	return e, nil
}

// compileError is the field error of an expression the sandbox refuses,
// in the words of a definition: an oversized expression is quoted only in
// part, and a variable refers to the references.
func compileError(fp *field.Path, src string, err error) *field.Error {
	var le *jq.LimitError
	var re *jq.RebindError
	switch {
	case errors.As(err, &le) && le.Depth == 0:
		return field.TooLong(fp, shorten(src, maxValueInMessage), MaxExpressionBytes)
	case errors.As(err, &le):
		return field.Invalid(fp, shorten(src, maxValueInMessage), err.Error())
	case errors.As(err, &re):
		return field.Invalid(fp, src, fmt.Sprintf("%s is the variable of a reference (%s); bind another name", re.Name, AnnotationReferences))
	case errors.Is(err, jq.ErrUndefinedVariable):
		return field.Invalid(fp, src, err.Error()+"; a definition reads another object through a reference declared in the annotation "+AnnotationReferences+" (not in pod-side paths)")
	}
	return field.Invalid(fp, src, err.Error())
}

// writeKind is what write-back sets.
type writeKind int

const (
	writeSchedulerName writeKind = iota
	writeLabels
	writeAnnotations
	numWriteKinds
)

func (k writeKind) String() string {
	return [...]string{"scheduler name", "labels", "annotations"}[k]
}

// writeTarget is a compiled path(expr) for write-back. suffix is appended to
// every path the expression yields (for example spec.schedulerName below a
// podTemplateSpecPath). err says why the target cannot be written; it is
// reported only when write-back needs the target, since reading through
// such a path is fine.
type writeTarget struct {
	field  string
	suffix []any
	path   *expr // path(<the definition's expression>)
	// needBase skips paths where the object has no value: a template that
	// is not there is not created.
	needBase bool
	err      error
}

func newWriteTarget(e *expr, fieldName string, needBase bool, suffix ...any) writeTarget {
	if e == nil {
		return writeTarget{field: fieldName, err: fmt.Errorf("%w: the definition has no %s", ErrNotWritable, fieldName)}
	}
	t := writeTarget{field: e.field, suffix: suffix, needBase: needBase}
	if why := e.code.SimplePathReason(); why != "" {
		t.err = fmt.Errorf("%w: %s %q uses %s; write-back needs a simple path such as .spec.template", ErrNotWritable, e.field, e.src, why)
		return t
	}
	code, err := e.code.PathExpr()
	if err != nil {
		t.err = fmt.Errorf("%w: %s %q: %v", ErrNotWritable, e.field, e.src, err)
		return t
	}
	t.path = &expr{field: e.field, src: code.String(), code: code}
	return t
}

func build(k *kartav1alpha1.Karta, opts Options) (*Compiled, field.ErrorList) {
	if k == nil {
		return nil, field.ErrorList{field.Required(field.NewPath("spec"), "no definition")}
	}
	b := &builder{c: &Compiled{karta: k, opts: opts.withDefaults(), name: k.Name}}
	if b.bounds(); len(b.errs) > 0 {
		return nil, b.errs
	}
	b.references()
	b.topologyPaths()
	b.components()
	b.gangScheduling()
	if len(b.errs) > 0 {
		return nil, b.errs
	}
	b.overrideGang()
	if len(b.errs) > 0 {
		return nil, b.errs
	}
	b.c.computePodNeeds()
	return b.c, nil
}
