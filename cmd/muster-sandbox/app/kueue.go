package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"

	"github.com/muster-io/muster/localcluster"
)

// KueueOperator is the operator (localcluster/operators) that runs Kueue.
const KueueOperator = "kueue"

// Kueue's queues in the sandbox: submit with the label
// kueue.x-k8s.io/queue-name=KueueLocalQueue in namespace default.
const (
	KueueClusterQueue = "gpus"
	KueueLocalQueue   = "default"
	kueueNamespace    = "kueue-system"
	kueueUserNS       = "default"
)

// startKueue runs Kueue (Kueue) and makes its queues: a ResourceFlavor
// and the ClusterQueue KueueClusterQueue with KueueGPUs of quota, and the
// LocalQueue KueueLocalQueue in the default namespace. Kueue asked for
// and not running is an error: without it nothing the examples submit
// would ever start.
func (sb *sandbox) startKueue(ctx context.Context) error {
	if err := createNamespace(ctx, sb.cp, kueueNamespace); err != nil {
		return err
	}
	cfg, err := kueueConfig(sb.root)
	if err != nil {
		return err
	}
	sb.operatorOptions[KueueOperator] = localcluster.OperatorOptions{Config: cfg}
	if err := sb.ensureOperator(ctx, KueueOperator); err != nil {
		return err
	}
	if why := sb.unavailable[KueueOperator]; why != "" {
		return fmt.Errorf("--kueue: Kueue is not running: %s", why)
	}
	q := localcluster.KueueQueues{ClusterQueue: KueueClusterQueue, Namespace: kueueUserNS, LocalQueue: KueueLocalQueue, GPUs: sb.cfg.KueueGPUs}
	if _, err := sb.cp.Apply(ctx, []byte(localcluster.KueueQueuesYAML(q)), kueueUserNS); err != nil {
		return fmt.Errorf("Kueue queues: %w", err)
	}
	sb.progress("Kueue queues: ClusterQueue %s (%d nvidia.com/gpu of quota), LocalQueue %s in namespace %s; submit a workload with the label kueue.x-k8s.io/queue-name=%s",
		KueueClusterQueue, sb.cfg.KueueGPUs, KueueLocalQueue, kueueUserNS, KueueLocalQueue)
	return nil
}

// KueueConfigFragment is, in the source tree, the Kueue configuration
// muster ships (manifests/README.md#kueue); the sandbox runs Kueue on it.
const KueueConfigFragment = "manifests/kueue/kueue-config-fragment.yaml"

// kueueConfig is the shipped fragment with Kueue's namespace.
func kueueConfig(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, KueueConfigFragment))
	if err != nil {
		return "", err
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return "", fmt.Errorf("%s: %w", KueueConfigFragment, err)
	}
	cfg["namespace"] = kueueNamespace
	out, err := yaml.Marshal(cfg)
	return string(out), err
}
