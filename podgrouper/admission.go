package podgrouper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/muster-io/muster/api"
)

// WebhookPath is where the admission webhook is served.
const WebhookPath = "/mutate-v1-pod"

// maxAdmissionBody bounds an AdmissionReview read: a pod is at most about
// 1.5 MB in etcd, and a CREATE review carries one object.
const maxAdmissionBody = 8 << 20

// Admission is the webhook's verdict on one pod create.
type Admission struct {
	// PodGroup, when set, is the native PodGroup the pod joins: the
	// webhook sets spec.schedulingGroup.podGroupName to it.
	PodGroup string
	// Refusal, when set, refuses the create with this message (fail
	// closed: the pod's gang cannot be computed now). The workload's
	// controller retries the create.
	Refusal string
	// Retry marks a refusal that goes away on its own (caches not synced,
	// an API error), as opposed to one a user must fix.
	Retry bool
	// Why says why the pod is left as it is (logs, tests).
	Why string
}

// Admit decides, for a pod being created, which native PodGroup it joins.
// It computes the gang as sync does (owner chain, top-most definition, its
// gang for the pod) and never lets a member of a gang be created ungrouped:
// what cannot be computed is refused. Pods already grouped, pods of other
// schedulers, pods in another gang mechanism and gangs that already run on
// a scheduler-plugins PodGroup (created before native mode) are left as
// they are.
func (c *Controller) Admit(ctx context.Context, pod *corev1.Pod) Admission {
	switch {
	case c.native == nil:
		return Admission{Why: "native mode is off"}
	case pod.Spec.SchedulingGroup != nil:
		return Admission{Why: "spec.schedulingGroup is already set"}
	case !c.ownScheduler(pod.Spec.SchedulerName):
		return Admission{Why: fmt.Sprintf("scheduler %q is not one the pod-grouper serves", pod.Spec.SchedulerName)}
	case foreignMarker(pod) != "":
		return Admission{Why: foreignMarker(pod)}
	case !c.Started():
		return Admission{Refusal: "muster-podgrouper is starting (its caches are not synced yet); retry", Retry: true}
	}
	d, err := c.decide(ctx, pod)
	if err != nil {
		return Admission{Refusal: fmt.Sprintf("muster-podgrouper cannot compute the pod's gang now: %v; retry", err), Retry: true}
	}
	if d.hold != "" {
		c.noteWorkload(d.workload, corev1.EventTypeWarning, eventReasonGangUnknown, d.hold)
		return Admission{Refusal: d.hold}
	}
	if d.gang == nil {
		return Admission{Why: d.reason}
	}
	if d.nativePG == nil {
		return Admission{Why: "the pod is its own workload; native PodGroups are made for workloads above pods"}
	}
	if c.schedulers[pod.Spec.SchedulerName] && c.onSchedulerPlugins(d) {
		return Admission{Why: fmt.Sprintf("its gang runs on scheduler-plugins PodGroup %s (made before native mode); it stays there until the workload ends", d.pgName)}
	}
	if len(pod.Spec.EvictionResponders) > 0 {
		// The API server refuses a grouped pod with eviction responders,
		// and an ungrouped member would loosen the gang.
		note := api.CapReason(fmt.Sprintf("pod of gang %s has spec.evictionResponders, which a native PodGroup member cannot have; remove them or opt the namespace out of native gangs (%s)", d.nativePG.Name, api.LabelNativeGangs))
		c.noteWorkload(d.workload, corev1.EventTypeWarning, eventReasonGangUnknown, note)
		return Admission{Refusal: note}
	}
	return Admission{PodGroup: d.nativePG.Name}
}

// onSchedulerPlugins reports whether d's gang already has a
// scheduler-plugins PodGroup of muster's for the same workload: its first
// members were grouped before native mode, and a gang split across the two
// APIs would never reach its minimum in either.
func (c *Controller) onSchedulerPlugins(d *decision) bool {
	pg, err := c.cachedPodGroup(d.pg.Namespace, d.pgName)
	if err != nil || !isMusterPodGroup(pg) || pg.DeletionTimestamp != nil {
		return false
	}
	for _, r := range pg.OwnerReferences {
		if r.UID == d.rootUID {
			return true
		}
	}
	return false
}

// WebhookHandler serves the mutating admission webhook (AdmissionReview
// v1) at WebhookPath: pod CREATE gets spec.schedulingGroup as Admit says.
func (c *Controller) WebhookHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		review, status, err := readReview(w, r)
		if err != nil {
			http.Error(w, err.Error(), status)
			webhookDuration.WithLabelValues("malformed").Observe(time.Since(start).Seconds())
			return
		}
		resp, result := c.review(r.Context(), review.Request)
		out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
		body, err := json.Marshal(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if _, err := w.Write(body); err != nil {
			klog.FromContext(r.Context()).V(2).Info("Writing the admission response failed", "err", err)
		}
		webhookDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
	})
}

// readReview decodes a bounded AdmissionReview with a request.
func readReview(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, int, error) {
	if r.Method != http.MethodPost {
		return nil, http.StatusMethodNotAllowed, fmt.Errorf("%s: only POST", r.Method)
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdmissionBody))
	if err != nil {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("reading the AdmissionReview: %w", err)
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &review); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if review.Request == nil {
		return nil, http.StatusBadRequest, errors.New("the AdmissionReview has no request")
	}
	return &review, 0, nil
}

// review answers one admission request, and names the result for the
// metric.
func (c *Controller) review(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, string) {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Operation != admissionv1.Create || req.Kind.Group != "" || req.Kind.Kind != "Pod" || req.SubResource != "" {
		return resp, "unchanged"
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		resp.Allowed = false
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest,
			Message: fmt.Sprintf("muster-podgrouper cannot decode the pod: %v", err)}
		return resp, "refused"
	}
	// A pod created through its namespace's endpoint may not carry the
	// namespace yet.
	if pod.Namespace == "" {
		pod.Namespace = req.Namespace
	}
	a := c.Admit(ctx, pod)
	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(pod.Namespace, podName(pod)))
	switch {
	case a.Refusal != "":
		resp.Allowed = false
		code, reason := int32(http.StatusForbidden), metav1.StatusReasonForbidden
		if a.Retry {
			code, reason = http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable
		}
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: a.Refusal}
		logger.V(2).Info("Refused pod create", "why", a.Refusal)
		return resp, "refused"
	case a.PodGroup != "":
		patch, err := json.Marshal([]map[string]any{{
			"op": "add", "path": "/spec/schedulingGroup",
			"value": map[string]any{"podGroupName": a.PodGroup},
		}})
		if err != nil {
			resp.Allowed = false
			resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: err.Error()}
			return resp, "refused"
		}
		pt := admissionv1.PatchTypeJSONPatch
		resp.Patch, resp.PatchType = patch, &pt
		logger.V(4).Info("Joined pod to its native PodGroup", "podGroup", a.PodGroup)
		return resp, "joined"
	}
	logger.V(5).Info("Pod left as it is", "why", a.Why)
	return resp, "unchanged"
}

// podName names a pod being created, which may only have a generateName.
func podName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName + "*"
}
