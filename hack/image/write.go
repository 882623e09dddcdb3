package image

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Outputs are the files Write makes, all in one directory:
//
//   - Layout, "oci/": an OCI image layout holding the index (both
//     platforms), for skopeo/crane/oras and for Push;
//   - OCIArchive, "muster-oci.tar": the same layout as one tar, what
//     `ctr images import`, `podman load` and Docker ≥ 25 `docker load` take;
//   - DockerArchives, "muster-<os>-<arch>.tar": one image in the
//     `docker save` format per platform, what every `docker load`,
//     `podman load`, `kind load image-archive` and `ctr images import` take.
//
// Every archive names the image Options.Tag.
type Outputs struct {
	Layout         string
	OCIArchive     string
	DockerArchives map[string]string // by PlatformString
}

// Write writes idx's outputs into dir, replacing what an earlier build
// left there. Archive entries are sorted and carry o.Created, so equal
// images give equal files.
func Write(dir string, idx v1.ImageIndex, o Options) (*Outputs, error) {
	tag, err := o.Tag()
	if err != nil {
		return nil, err
	}
	out := &Outputs{
		Layout:         filepath.Join(dir, "oci"),
		OCIArchive:     filepath.Join(dir, "muster-oci.tar"),
		DockerArchives: map[string]string{},
	}
	if err := os.RemoveAll(out.Layout); err != nil {
		return nil, err
	}
	lp, err := layout.Write(out.Layout, empty.Index)
	if err != nil {
		return nil, err
	}
	// The OCI name (the tag alone) and containerd's and Docker's (the whole
	// reference): without it `ctr images import` and `docker load` import
	// the image without a name.
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.TagStr(),
		"io.containerd.image.name":          tag.Name(),
	})); err != nil {
		return nil, err
	}
	if err := tarDir(out.OCIArchive, out.Layout, o.Created); err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform == nil {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, fmt.Sprintf("muster-%s-%s%s.tar", d.Platform.OS, d.Platform.Architecture, d.Platform.Variant))
		// One tag: with two, the order of RepoTags in manifest.json
		// would vary from one write to the next.
		if err := tarball.WriteToFile(p, tag, img); err != nil {
			return nil, err
		}
		out.DockerArchives[PlatformString(*d.Platform)] = p
	}
	return out, nil
}

// tarDir writes the files under dir into the tar file dst, sorted, with
// paths relative to dir (index.json at the root, as an OCI archive has
// it), owned by root, at time mtime.
func tarDir(dst, dir string, mtime time.Time) (err error) {
	var names []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	tw := tar.NewWriter(f)
	for _, p := range names {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime.UTC().Truncate(time.Second), Format: tar.FormatPAX}
		if fi.IsDir() {
			h.Typeflag, h.Mode, h.Name = tar.TypeDir, 0o755, h.Name+"/"
		} else {
			h.Typeflag, h.Mode, h.Size = tar.TypeReg, 0o644, fi.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.IsDir() {
			continue
		}
		if err := copyFile(tw, p); err != nil {
			return err
		}
	}
	return tw.Close()
}

func copyFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// ReadLayout reads the image index Write put into the layout dir.
func ReadLayout(dir string) (v1.ImageIndex, error) {
	outer, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) != 1 {
		return nil, fmt.Errorf("layout %s: %d entries in index.json, want the one image index", dir, len(m.Manifests))
	}
	return outer.ImageIndex(m.Manifests[0].Digest)
}

// Push pushes idx (both platforms, under one tag) to ref, with the
// credentials of the Docker config (~/.docker/config.json, credential
// helpers), as `docker push` would find them.
func Push(ctx context.Context, idx v1.ImageIndex, ref name.Reference) error {
	return remote.WriteIndex(ref, idx, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain))
}
