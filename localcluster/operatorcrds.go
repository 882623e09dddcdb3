package localcluster

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/muster-io/muster/localcluster/operators"
)

// InstallOperatorCRDs installs the CRDs the operator's module ships.
func (cp *ControlPlane) InstallOperatorCRDs(ctx context.Context, name string) error {
	spec, _, err := operators.Get(name)
	if err != nil {
		return err
	}
	modDir, err := operators.ModuleDir(ctx, name)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(modDir, spec.CRDDir, "*.yaml"))
	if err == nil && len(spec.CRDFiles) > 0 {
		files = files[:0]
		for _, f := range spec.CRDFiles {
			files = append(files, filepath.Join(modDir, spec.CRDDir, f))
		}
	}
	if err != nil || len(files) == 0 {
		return fmt.Errorf("operator %s: no CRDs in %s (%v)", name, filepath.Join(modDir, spec.CRDDir), err)
	}
	for _, f := range files {
		if err := cp.InstallCRDFile(ctx, f); err != nil {
			return fmt.Errorf("operator %s: %w", name, err)
		}
	}
	return nil
}
