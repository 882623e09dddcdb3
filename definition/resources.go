package definition

import (
	"math/big"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// PodRequests is the effective request of a pod spec for every resource: the
// larger of the largest init container and the sum of the containers plus
// restartable sidecars, plus overhead; a container's limit stands in for a
// request it does not set (as the API server's defaulting does for pods, but
// templates are not defaulted).
func PodRequests(spec *corev1.PodSpec) corev1.ResourceList {
	if spec == nil {
		return corev1.ResourceList{}
	}
	pod := &corev1.Pod{Spec: *spec}
	pod.Spec.Containers = withLimitRequests(spec.Containers)
	pod.Spec.InitContainers = withLimitRequests(spec.InitContainers)
	if r := spec.Resources; r != nil && len(r.Limits) > 0 {
		rr := r.DeepCopy()
		rr.Requests = fillRequests(rr.Requests, rr.Limits)
		pod.Spec.Resources = rr
	}
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}

// withLimitRequests returns cs, copied when some container needs its limits
// to stand in for requests.
func withLimitRequests(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for i := range cs {
		lim := cs[i].Resources.Limits
		need := false
		for name := range lim {
			if _, ok := cs[i].Resources.Requests[name]; !ok {
				need = true
				break
			}
		}
		if !need {
			continue
		}
		if out == nil {
			out = append([]corev1.Container(nil), cs...)
		}
		out[i].Resources.Requests = fillRequests(cs[i].Resources.Requests, lim)
	}
	if out == nil {
		return cs
	}
	return out
}

func fillRequests(req, lim corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(req)+len(lim))
	for k, v := range req {
		out[k] = v
	}
	for k, v := range lim {
		if _, ok := out[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// GPUs sums the quantities of the GPU resources in rl.
func GPUs(rl corev1.ResourceList, names []corev1.ResourceName) int64 {
	var n int64
	for _, name := range names {
		if q, ok := rl[name]; ok {
			n += q.Value()
		}
	}
	return n
}

// addScaled adds n × each quantity of rl to sum.
func addScaled(sum, rl corev1.ResourceList, n int64) {
	if n == 0 {
		return
	}
	for name, q := range rl {
		s := sum[name]
		s.Add(scaleQuantity(q, n, 1, false))
		sum[name] = s
	}
}

// scaleQuantity is q × num / den rounded up, to whole units when whole is
// set (milli-units otherwise), computed with big integers so that large
// memory sizes do not overflow.
func scaleQuantity(q resource.Quantity, num, den int64, whole bool) resource.Quantity {
	if num == den {
		return q.DeepCopy()
	}
	v := milliBig(q)
	v.Mul(v, big.NewInt(num))
	if whole {
		den *= 1000
	}
	d := big.NewInt(den)
	r := new(big.Int)
	v.QuoRem(v, d, r)
	if r.Sign() > 0 {
		v.Add(v, big.NewInt(1))
	}
	if whole {
		v.Mul(v, big.NewInt(1000))
	}
	if v.IsInt64() {
		return *resource.NewMilliQuantity(v.Int64(), q.Format)
	}
	v.Quo(v, big.NewInt(1000))
	if v.IsInt64() {
		return *resource.NewQuantity(v.Int64(), q.Format)
	}
	return *resource.NewQuantity(1<<62, q.Format)
}

// milliBig is q in milli-units, rounded up, without the overflow of
// MilliValue for very large quantities.
func milliBig(q resource.Quantity) *big.Int {
	d := q.AsDec()
	v := new(big.Int).Set(d.UnscaledBig())
	shift := 3 + int64(-d.Scale()) // value = unscaled × 10^-scale
	ten := big.NewInt(10)
	if shift >= 0 {
		return v.Mul(v, new(big.Int).Exp(ten, big.NewInt(shift), nil))
	}
	div := new(big.Int).Exp(ten, big.NewInt(-shift), nil)
	r := new(big.Int)
	v.QuoRem(v, div, r)
	if r.Sign() > 0 {
		v.Add(v, big.NewInt(1))
	}
	return v
}
