package harness

// Temporary: pins the control-plane dependencies until the harness lands.
import (
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/itchyny/gojq"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "k8s.io/cli-runtime/pkg/genericclioptions"
	_ "k8s.io/component-base/logs/json"
	_ "k8s.io/component-helpers/resource"
	_ "k8s.io/controller-manager/pkg/informerfactory"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/pkg/controller/cronjob"
	_ "k8s.io/kubernetes/pkg/controller/deployment"
	_ "k8s.io/kubernetes/pkg/controller/garbagecollector"
	_ "k8s.io/kubernetes/pkg/controller/job"
	_ "k8s.io/kubernetes/pkg/controller/replicaset"
	_ "k8s.io/kubernetes/pkg/controller/statefulset"
	_ "k8s.io/kubernetes/pkg/scheduler"
	_ "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	_ "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	_ "sigs.k8s.io/scheduler-plugins/pkg/generated/informers/externalversions"
	_ "sigs.k8s.io/yaml"
)
