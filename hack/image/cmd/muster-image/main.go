// Command muster-image builds muster's container image without a
// container engine (make image) and pushes it (make push). See package
// github.com/muster-io/muster/hack/image.
//
//	muster-image build -out bin/image -version v0.1.0 -revision $(git rev-parse HEAD) \
//	    -created $(git log -1 --format=%ct) -ldflags '...'
//	muster-image push -layout bin/image/oci registry.example.com/team/muster:v0.1.0
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/muster-io/muster/hack/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "build":
		err = build(ctx, os.Args[2:])
	case "push":
		err = push(ctx, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "muster-image:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: muster-image build -out DIR -version V [flags] | muster-image push -layout DIR REFERENCE")
	os.Exit(2)
}

func build(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("build", flag.ExitOnError)
	out := fs.String("out", "bin/image", "output directory (the binaries go to OUT/build/)")
	version := fs.String("version", "", "image version: the version label and the tag in the archives")
	revision := fs.String("revision", "", "source commit: the revision label")
	created := fs.String("created", os.Getenv("SOURCE_DATE_EPOCH"), "file and image time, seconds since the epoch (SOURCE_DATE_EPOCH)")
	ldflags := fs.String("ldflags", "", "go build -ldflags (the Makefile's LDFLAGS)")
	platforms := fs.String("platforms", "", "comma-separated os/arch list (default: "+platformList(image.Platforms)+")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *version == "" {
		return fmt.Errorf("-version is required")
	}
	secs, err := strconv.ParseInt(*created, 10, 64)
	if err != nil {
		return fmt.Errorf("-created %q: seconds since the epoch: %w", *created, err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	o := image.Options{
		ModuleDir: wd, Version: *version, Revision: *revision, Created: time.Unix(secs, 0),
		LDFlags: *ldflags, Log: os.Stderr,
	}
	if *platforms != "" {
		for _, s := range strings.Split(*platforms, ",") {
			p, err := v1.ParsePlatform(s)
			if err != nil {
				return err
			}
			o.Platforms = append(o.Platforms, *p)
		}
	}
	begin := time.Now()
	idx, err := image.Build(ctx, o, filepath.Join(*out, "build"))
	if err != nil {
		return err
	}
	outputs, err := image.Write(*out, idx, o)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	tag, err := o.Tag()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s (built in %s)\n", tag, digest, time.Since(begin).Round(time.Second))
	m, err := idx.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			return err
		}
		size, err := image.CompressedSize(img)
		if err != nil {
			return err
		}
		fmt.Printf("  %-12s %s  %.1f MB compressed\n", image.PlatformString(*d.Platform), d.Digest, float64(size)/1e6)
	}
	fmt.Printf("OCI layout:  %s   (skopeo copy oci:%s docker://REF, make push)\n", outputs.Layout, outputs.Layout)
	fmt.Printf("OCI archive: %s   (ctr images import, podman load, docker load on Docker ≥ 25)\n", outputs.OCIArchive)
	for _, p := range sortedKeys(outputs.DockerArchives) {
		fmt.Printf("%s: %s   (docker load, podman load, kind load image-archive, ctr images import)\n", p, outputs.DockerArchives[p])
	}
	return nil
}

func push(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("push", flag.ExitOnError)
	dir := fs.String("layout", "bin/image/oci", "the OCI layout make image wrote")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("push: one image reference, e.g. registry.example.com/team/muster:v0.1.0")
	}
	ref, err := name.ParseReference(fs.Arg(0))
	if err != nil {
		return err
	}
	idx, err := image.ReadLayout(*dir)
	if err != nil {
		return fmt.Errorf("%w (run make image first)", err)
	}
	if err := image.Push(ctx, idx, ref); err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("pushed %s@%s\n", ref, digest)
	return nil
}

func platformList(ps []v1.Platform) string {
	var s []string
	for _, p := range ps {
		s = append(s, image.PlatformString(p))
	}
	return strings.Join(s, ",")
}

func sortedKeys(m map[string]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
