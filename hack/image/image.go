// Package image assembles muster's container image from its Go binaries
// without a container engine (no Docker daemon, no base image pulled): an
// empty base, one layer holding the static binaries and a minimal
// /etc/passwd for the non-root user, for linux/amd64 and linux/arm64 under
// one image index. `make image` and `make push` drive it through
// hack/image/cmd/muster-image; test/e2e runs the binaries it produces.
//
// The Dockerfile builds the same image with Docker (same paths, user,
// entrypoint and labels); dockerfile_test.go holds the two equal.
//
// Reproducible: the binaries are built with -trimpath and without the VCS
// stamp, every file of the layer has the same time (Options.Created, the
// commit time in `make image`), entries are sorted, and the layer is
// compressed once with a fixed gzip level, so building twice from the same
// commit gives the same digests.
package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image is. The Dockerfile says the same (dockerfile_test.go).
const (
	// Repository is the image the shipped manifests name.
	Repository  = "ghcr.io/muster-io/muster"
	Source      = "https://github.com/muster-io/muster"
	Licenses    = "Apache-2.0"
	Description = "muster: gang scheduling for any workload type"
	// User is distroless's nonroot (uid and gid 65532), the user the
	// Deployment's securityContext runs as.
	User       = "65532:65532"
	WorkingDir = "/home/nonroot"
)

// The OCI label keys the image carries (also as annotations of the index).
const (
	LabelSource      = "org.opencontainers.image.source"
	LabelVersion     = "org.opencontainers.image.version"
	LabelRevision    = "org.opencontainers.image.revision"
	LabelLicenses    = "org.opencontainers.image.licenses"
	LabelDescription = "org.opencontainers.image.description"
	LabelCreated     = "org.opencontainers.image.created"
)

// Entrypoint is the scheduler, as in the Dockerfile; the Deployment sets
// each container's command anyway.
var Entrypoint = []string{"/usr/local/bin/muster-scheduler"}

// Binary is one executable of the image: built from Package (relative to
// the module root), or, with Link set, a hard link to another Binary's path.
type Binary struct {
	Path    string
	Package string
	Link    string
}

// Binaries are the executables the image ships, at the paths the
// manifests run. muster-sandbox is not among them: it runs a whole control
// plane in-process and is a local tool (make run).
var Binaries = []Binary{
	{Path: "/usr/local/bin/muster-scheduler", Package: "./cmd/muster-scheduler"},
	{Path: "/usr/local/bin/muster-podgrouper", Package: "./cmd/muster-podgrouper"},
	{Path: "/usr/local/bin/muster", Package: "./cmd/muster"},
	// kubectl finds plugins by file name; a link, not a second 60 MB copy.
	{Path: "/usr/local/bin/kubectl-muster", Link: "/usr/local/bin/muster"},
}

// Platforms are the platforms `make image` builds.
var Platforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

// env is the image's environment: distroless's PATH.
var env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// Files of the layer besides the binaries: the accounts of distroless's
// nonroot variant (the Deployment runs as 65532 and needs no name, but
// tools that look the user up find it), and the resolver order Go's net
// package reads.
var etcFiles = map[string]string{
	"/etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
	"/etc/group":         "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n",
	"/etc/nsswitch.conf": "hosts: files dns\n",
}

// Options say what to build and how.
type Options struct {
	// ModuleDir is the root of the muster module (go build runs there).
	ModuleDir string
	// Version and Revision are the image's version and source commit
	// labels. Version must be a valid tag: it names the image in the
	// archives.
	Version, Revision string
	// Created is the time of every file of the layer and of the image
	// config: the commit time keeps builds of one commit identical.
	Created time.Time
	// LDFlags are go build's -ldflags: the Makefile's, which stamp the
	// muster and Kubernetes versions.
	LDFlags string
	// Platforms to build; Platforms when empty.
	Platforms []v1.Platform
	// Go is the go command; "go" when empty.
	Go string
	// Log receives go build's output; discarded when nil.
	Log io.Writer
}

func (o Options) platforms() []v1.Platform {
	if len(o.Platforms) == 0 {
		return Platforms
	}
	return o.Platforms
}

// Labels are the image's OCI labels.
func (o Options) Labels() map[string]string {
	return map[string]string{
		LabelSource:      Source,
		LabelVersion:     o.Version,
		LabelRevision:    o.Revision,
		LabelLicenses:    Licenses,
		LabelDescription: Description,
	}
}

// Tag is the name the archives give the image: Repository:Version.
func (o Options) Tag() (name.Tag, error) {
	t, err := name.NewTag(Repository+":"+o.Version, name.StrictValidation)
	if err != nil {
		return name.Tag{}, fmt.Errorf("version %q does not make an image tag: %w", o.Version, err)
	}
	return t, nil
}

// PlatformString is os/arch[/variant], the form docker --platform takes.
func PlatformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// Build cross-compiles the binaries for every platform into
// workDir/<os>-<arch>/ and assembles the image index.
func Build(ctx context.Context, o Options, workDir string) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, p := range o.platforms() {
		dir := filepath.Join(workDir, p.OS+"-"+p.Architecture+p.Variant)
		if err := BuildBinaries(ctx, o, p, dir); err != nil {
			return nil, err
		}
		img, err := Image(o, p, dir)
		if err != nil {
			return nil, err
		}
		add, err := IndexEntry(img, p)
		if err != nil {
			return nil, err
		}
		adds = append(adds, add)
	}
	return Index(o, adds...), nil
}

// IndexEntry is img as platform p's entry of an index.
func IndexEntry(img v1.Image, p v1.Platform) (mutate.IndexAddendum, error) {
	d, err := partial.Descriptor(img)
	if err != nil {
		return mutate.IndexAddendum{}, err
	}
	// go-containerregistry marks every image as an artifact of its config
	// type; an image index of images has no artifactType (as docker
	// buildx writes it).
	d.ArtifactType = ""
	d.Platform = &p
	return mutate.IndexAddendum{Add: describedImage{img, d}}, nil
}

// describedImage is an image with the descriptor an index gives it.
type describedImage struct {
	v1.Image
	desc *v1.Descriptor
}

func (i describedImage) Descriptor() (*v1.Descriptor, error) { return i.desc, nil }

// Index is the OCI image index of the given platform images, annotated
// with the labels (registries show an index's annotations, not its
// images' labels).
func Index(o Options, adds ...mutate.IndexAddendum) v1.ImageIndex {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	idx = mutate.AppendManifests(idx, adds...)
	anns := o.Labels()
	anns[LabelCreated] = o.Created.UTC().Format(time.RFC3339)
	return mutate.Annotations(idx, anns).(v1.ImageIndex)
}

// BuildBinaries builds the Binaries for p into dir, static (CGO off),
// with -trimpath and without the VCS stamp, so the result depends on the
// source and the toolchain only.
func BuildBinaries(ctx context.Context, o Options, p v1.Platform, dir string) error {
	if p.OS != "linux" {
		return fmt.Errorf("platform %s: only linux images are built", PlatformString(p))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", o.LDFlags, "-o", dir + string(filepath.Separator)}
	for _, b := range Binaries {
		if b.Package != "" {
			args = append(args, b.Package)
		}
	}
	goCmd := o.Go
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, args...)
	cmd.Dir = o.ModuleDir
	// The architecture levels are pinned: a GOAMD64=v3 in someone's
	// environment must not change the image.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOAMD64=v1", "GOARM64=v8.0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if o.Log != nil {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, o.Log), io.MultiWriter(&out, o.Log)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s (%s): %w\n%s", strings.Join(args, " "), PlatformString(p), err, out.Bytes())
	}
	return nil
}

// Image assembles the image of platform p from the binaries in binDir
// (each named after its package, as go build -o dir/ names them).
func Image(o Options, p v1.Platform, binDir string) (v1.Image, error) {
	layerData, err := Layer(binDir, o.Created)
	if err != nil {
		return nil, err
	}
	digest, _, err := v1.SHA256(bytes.NewReader(layerData))
	if err != nil {
		return nil, err
	}
	layer, err := partial.CompressedToLayer(gzipLayer{data: layerData, digest: digest})
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Created.UTC()}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Variant:      p.Variant,
		Created:      created,
		Config: v1.Config{
			User:       User,
			Entrypoint: Entrypoint,
			Env:        env,
			WorkingDir: WorkingDir,
			Labels:     o.Labels(),
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "hack/image: " + strings.Join(binaryPaths(), " ") + " /etc/passwd /etc/group", Comment: "muster " + o.Version},
	})
}

// gzipLayer is a layer compressed once, in memory: go-containerregistry
// reads it as is and computes its diff ID by decompressing it.
type gzipLayer struct {
	data   []byte
	digest v1.Hash
}

func (l gzipLayer) Digest() (v1.Hash, error)            { return l.digest, nil }
func (l gzipLayer) Size() (int64, error)                { return int64(len(l.data)), nil }
func (l gzipLayer) MediaType() (types.MediaType, error) { return types.OCILayer, nil }
func (l gzipLayer) Compressed() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(l.data)), nil
}

func binaryPaths() []string {
	var out []string
	for _, b := range Binaries {
		out = append(out, b.Path)
	}
	return out
}

// entry is one file of the layer.
type entry struct {
	hdr  tar.Header
	data []byte
	file string // read from this file when data is nil
}

// Layer returns the image's only layer, gzip-compressed: the Binaries from
// binDir, the etc files, and their directories, every entry at time
// created and sorted by path (a hard link after its target).
func Layer(binDir string, created time.Time) ([]byte, error) {
	mtime := created.UTC().Truncate(time.Second)
	entries := map[string]*entry{}
	addDirs := func(p string) {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if entries[d] == nil {
				entries[d] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}}
			}
		}
	}
	for p, content := range etcFiles {
		addDirs(p)
		entries[p] = &entry{hdr: tar.Header{Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))}, data: []byte(content)}
	}
	// The home directory of nonroot and a world-writable /tmp, as distroless has.
	addDirs(WorkingDir + "/")
	entries[WorkingDir] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: 0o700, Uid: 65532, Gid: 65532}}
	entries["/tmp"] = &entry{hdr: tar.Header{Typeflag: tar.TypeDir, Mode: 0o1777}}
	var links []Binary
	for _, b := range Binaries {
		addDirs(b.Path)
		if b.Link != "" {
			links = append(links, b)
			continue
		}
		file := filepath.Join(binDir, path.Base(b.Package))
		fi, err := os.Stat(file)
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file", file)
		}
		entries[b.Path] = &entry{hdr: tar.Header{Typeflag: tar.TypeReg, Mode: 0o755, Size: fi.Size()}, file: file}
	}
	names := make([]string, 0, len(entries))
	for p := range entries {
		names = append(names, p)
	}
	sort.Strings(names)
	sort.Slice(links, func(i, j int) bool { return links[i].Path < links[j].Path })

	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	write := func(p string, e *entry) error {
		h := e.hdr
		h.Name = strings.TrimPrefix(p, "/")
		if h.Typeflag == tar.TypeDir {
			h.Name += "/"
		}
		h.ModTime = mtime
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			return err
		}
		switch {
		case e.data != nil:
			_, err := tw.Write(e.data)
			return err
		case e.file != "":
			f, err := os.Open(e.file)
			if err != nil {
				return err
			}
			defer f.Close()
			n, err := io.Copy(tw, f)
			if err == nil && n != h.Size {
				err = fmt.Errorf("%s changed while it was read", e.file)
			}
			return err
		}
		return nil
	}
	for _, p := range names {
		if err := write(p, entries[p]); err != nil {
			return nil, err
		}
	}
	for _, l := range links {
		if entries[l.Link] == nil {
			return nil, fmt.Errorf("%s links to %s, which the image does not have", l.Path, l.Link)
		}
		e := &entry{hdr: tar.Header{Typeflag: tar.TypeLink, Linkname: strings.TrimPrefix(l.Link, "/")}}
		if err := write(l.Path, e); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// errNoImage is returned when an index holds no image for a platform.
var errNoImage = errors.New("no image for platform")

// PlatformImage returns the image of p in idx.
func PlatformImage(idx v1.ImageIndex, p v1.Platform) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == p.OS && d.Platform.Architecture == p.Architecture && d.Platform.Variant == p.Variant {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("%w %s", errNoImage, PlatformString(p))
}

// CompressedSize is the size of img's layers as pulled or loaded.
func CompressedSize(img v1.Image) (int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return 0, err
		}
		n += s
	}
	return n, nil
}
