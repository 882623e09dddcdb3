package gang

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/api"
)

// Args configures the MusterGang plugin (pluginConfig[].args in a
// KubeSchedulerConfiguration). Fields are pointers so that unset differs from
// zero; SetDefaultsArgs fills them.
type Args struct {
	// PermitTimeoutSeconds is how long reserved members wait at Permit for
	// the quorum when the PodGroup sets no scheduleTimeoutSeconds.
	// Range 1..870, default 60: the framework caps a Permit wait at 15
	// minutes, and the plugin adds a 30 s backstop to what it asks for.
	PermitTimeoutSeconds *int32 `json:"permitTimeoutSeconds,omitempty"`
	// BackoffSeconds is how long a gang that found no placement, or whose
	// member failed, is refused at once before it is planned again (unless
	// the cluster changes first). Range 0..600, default 5.
	BackoffSeconds *int32 `json:"backoffSeconds,omitempty"`
	// PartialGangGracePeriodSeconds is how long a gang may stay partly bound
	// (fewer than minMember members bound, others pending) before its bound
	// members are evicted. Range 1..86400, default 30.
	PartialGangGracePeriodSeconds *int32 `json:"partialGangGracePeriodSeconds,omitempty"`
	// TopologyRequiredAnnotation / TopologyPreferredAnnotation are the
	// PodGroup annotations naming a node label key for the gang's domain.
	// Defaults: muster.io/topology-required, muster.io/topology-preferred.
	TopologyRequiredAnnotation  *string `json:"topologyRequiredAnnotation,omitempty"`
	TopologyPreferredAnnotation *string `json:"topologyPreferredAnnotation,omitempty"`
	// RequirePodGrouper makes pods with neither a PodGroup label nor the
	// gang-free marker wait for the pod-grouper. Set it to false where no
	// pod-grouper runs: such pods are then scheduled alone. Default true.
	RequirePodGrouper *bool `json:"requirePodGrouper,omitempty"`
}

// SetDefaultsArgs fills every unset field.
func SetDefaultsArgs(a *Args) {
	setInt := func(p **int32, v int32) {
		if *p == nil {
			*p = &v
		}
	}
	setInt(&a.PermitTimeoutSeconds, 60)
	setInt(&a.BackoffSeconds, 5)
	setInt(&a.PartialGangGracePeriodSeconds, 30)
	if a.TopologyRequiredAnnotation == nil {
		v := api.AnnotationTopologyRequired
		a.TopologyRequiredAnnotation = &v
	}
	if a.TopologyPreferredAnnotation == nil {
		v := api.AnnotationTopologyPreferred
		a.TopologyPreferredAnnotation = &v
	}
	if a.RequirePodGrouper == nil {
		v := true
		a.RequirePodGrouper = &v
	}
}

// ValidateArgs checks defaulted args and returns every problem.
func ValidateArgs(path *field.Path, a *Args) field.ErrorList {
	var errs field.ErrorList
	checkRange := func(name string, v *int32, lo, hi int32) {
		if v == nil {
			errs = append(errs, field.Required(path.Child(name), "set by defaulting"))
			return
		}
		if *v < lo || *v > hi {
			errs = append(errs, field.Invalid(path.Child(name), *v, fmt.Sprintf("must be between %d and %d", lo, hi)))
		}
	}
	checkRange("permitTimeoutSeconds", a.PermitTimeoutSeconds, 1, int32(maxPermitTimeout/time.Second))
	checkRange("backoffSeconds", a.BackoffSeconds, 0, 600)
	checkRange("partialGangGracePeriodSeconds", a.PartialGangGracePeriodSeconds, 1, 86400)
	checkKey := func(name string, v *string) {
		if v == nil || *v == "" {
			errs = append(errs, field.Required(path.Child(name), "an annotation key is required"))
			return
		}
		for _, msg := range validation.IsQualifiedName(*v) {
			errs = append(errs, field.Invalid(path.Child(name), *v, msg))
		}
	}
	checkKey("topologyRequiredAnnotation", a.TopologyRequiredAnnotation)
	checkKey("topologyPreferredAnnotation", a.TopologyPreferredAnnotation)
	if a.TopologyRequiredAnnotation != nil && a.TopologyPreferredAnnotation != nil && *a.TopologyRequiredAnnotation == *a.TopologyPreferredAnnotation {
		errs = append(errs, field.Invalid(path.Child("topologyPreferredAnnotation"), *a.TopologyPreferredAnnotation, "must differ from topologyRequiredAnnotation"))
	}
	return errs
}

// DecodeArgs reads the plugin's args strictly (an unknown field is an error:
// frameworkruntime.DecodeInto would drop it silently), then defaults and
// validates them.
func DecodeArgs(obj runtime.Object) (*Args, error) {
	a := &Args{}
	switch o := obj.(type) {
	case nil:
	case *Args:
		a = o.DeepCopy()
	case *runtime.Unknown:
		raw := o.Raw
		if o.ContentType == runtime.ContentTypeYAML {
			j, err := yaml.YAMLToJSON(raw)
			if err != nil {
				return nil, fmt.Errorf("decoding %s args: %w", Name, err)
			}
			raw = j
		} else if o.ContentType != "" && o.ContentType != runtime.ContentTypeJSON {
			return nil, fmt.Errorf("decoding %s args: content type %q is not supported", Name, o.ContentType)
		}
		if len(bytes.TrimSpace(raw)) > 0 && string(bytes.TrimSpace(raw)) != "null" {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(a); err != nil {
				return nil, fmt.Errorf("decoding %s args: %w", Name, err)
			}
		}
	default:
		return nil, fmt.Errorf("decoding %s args: want runtime.Unknown, got %T", Name, obj)
	}
	SetDefaultsArgs(a)
	if errs := ValidateArgs(field.NewPath("pluginConfig").Key(Name).Child("args"), a); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return a, nil
}

// DeepCopy copies a.
func (a *Args) DeepCopy() *Args {
	out := &Args{}
	cp32 := func(p *int32) *int32 {
		if p == nil {
			return nil
		}
		v := *p
		return &v
	}
	cps := func(p *string) *string {
		if p == nil {
			return nil
		}
		v := *p
		return &v
	}
	out.PermitTimeoutSeconds = cp32(a.PermitTimeoutSeconds)
	out.BackoffSeconds = cp32(a.BackoffSeconds)
	out.PartialGangGracePeriodSeconds = cp32(a.PartialGangGracePeriodSeconds)
	out.TopologyRequiredAnnotation = cps(a.TopologyRequiredAnnotation)
	out.TopologyPreferredAnnotation = cps(a.TopologyPreferredAnnotation)
	if a.RequirePodGrouper != nil {
		v := *a.RequirePodGrouper
		out.RequirePodGrouper = &v
	}
	return out
}

// GetObjectKind and DeepCopyObject let *Args be passed as a runtime.Object
// (handy in tests and for callers that build args in code).
func (a *Args) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (a *Args) DeepCopyObject() runtime.Object { return a.DeepCopy() }
