package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/pflag"

	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/internal/images"
)

// Options are bex-images' flags.
type Options struct {
	Registry   string
	Tag        string
	Platforms  []string
	Components []string
	Insecure   bool

	ToolchainBase, StaticBase string
	CABundle                  string

	// Source is the checkout the components are compiled from; empty:
	// the module root at or above the working directory.
	Source string

	// revision and created come from the checkout's commit (Complete);
	// revisionErr says why there is none.
	revision    string
	created     time.Time
	revisionErr error
	// sourceURL is the chart's first source.
	sourceURL string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Platforms:  []string{"linux/amd64"},
		Components: images.Names(),
		CABundle:   images.DefaultCABundle,
	}
}

// AddFlags binds the options to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Registry, "registry", o.Registry, "Registry and path the images are pushed under, HOST[:PORT][/PATH]: the chart's global.imageRegistry (required)")
	fs.StringVar(&o.Tag, "tag", o.Tag, "Tag of every image [the chart's appVersion, the tag the chart deploys by default]")
	fs.StringSliceVar(&o.Platforms, "platform", o.Platforms, "Platforms to build, comma-separated linux/ARCH[/VARIANT]; more than one pushes an image index")
	fs.StringSliceVar(&o.Components, "components", o.Components, "Components to build, comma-separated")
	fs.BoolVar(&o.Insecure, "insecure", o.Insecure, "Reach the registry and the base images' registries over plain HTTP")
	fs.StringVar(&o.ToolchainBase, "toolchain-base", o.ToolchainBase, "Base image of bex-git, which builds apps in its own process: it must carry "+images.BaseToolchain.Needs()+" (required for bex-git; see docs/images.md)")
	fs.StringVar(&o.StaticBase, "static-base", o.StaticBase, "Base image of bex-controller-manager, bex-apiserver, bex-web and bex-edge [a minimal base: --ca-bundle, /etc/passwd with user 65532, /tmp]")
	fs.StringVar(&o.CABundle, "ca-bundle", o.CABundle, "PEM file of CA certificates the minimal base carries")
	fs.StringVar(&o.Source, "source", o.Source, "Checkout of bex the components are compiled from [the module root at or above the working directory]")
}

// Complete finds the checkout, and reads the default tag and the labels'
// source and revision from it. A checkout without git history only loses
// the revision label.
func (o *Options) Complete(ctx context.Context) error {
	var err error
	if o.Source == "" {
		if o.Source, err = images.ModuleRoot("."); err != nil {
			return err
		}
	}
	chart, err := images.ReadChart(o.Source)
	if err != nil {
		return err
	}
	if o.Tag == "" {
		o.Tag = chart.AppVersion
	}
	if len(chart.Sources) > 0 {
		o.sourceURL = chart.Sources[0]
	}
	o.revision, o.created, o.revisionErr = images.Revision(ctx, o.Source)
	return nil
}

// Validate checks the flags and says what to supply when a requested
// component has no base.
func (o *Options) Validate() error {
	_, err := o.publishOptions()
	return err
}

// publishOptions parses the flags into what images.Publish takes.
func (o *Options) publishOptions() (images.Options, error) {
	var errs []error
	po := images.Options{
		Root: o.Source, Registry: o.Registry, Tag: o.Tag, Insecure: o.Insecure, CABundle: o.CABundle,
		Revision: o.revision, SourceURL: o.sourceURL, Created: o.created,
	}
	if o.Registry == "" {
		errs = append(errs, errors.New("--registry is required: the HOST[:PORT][/PATH] the chart's global.imageRegistry names, e.g. registry.example.com/bex"))
	} else if _, err := name.NewRepository(strings.TrimSuffix(o.Registry, "/") + "/bex"); err != nil || strings.Contains(o.Registry, "://") {
		errs = append(errs, fmt.Errorf("--registry %q: want HOST[:PORT][/PATH] without a scheme, e.g. registry.example.com/bex or localhost:5000", o.Registry))
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`).MatchString(o.Tag) {
		errs = append(errs, fmt.Errorf("--tag %q: a tag is 1 to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'", o.Tag))
	}
	if len(o.Platforms) == 0 {
		errs = append(errs, errors.New("--platform is empty: give linux/amd64, linux/arm64 or both"))
	}
	seen := map[string]bool{}
	for _, s := range o.Platforms {
		p, err := images.ParsePlatform(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("--platform %q: %w", s, err))
			continue
		}
		if !seen[p.String()] {
			seen[p.String()] = true
			po.Platforms = append(po.Platforms, p)
		}
	}
	comps, err := images.Lookup(o.Components)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("--components: %w", err))
	case len(comps) == 0:
		errs = append(errs, fmt.Errorf("--components is empty (known: %s)", strings.Join(images.Names(), ", ")))
	}
	po.Components = comps

	var nopts []name.Option
	if o.Insecure {
		nopts = append(nopts, name.Insecure)
	}
	for _, b := range []struct {
		flag, value string
		ref         *name.Reference
	}{
		{"--toolchain-base", o.ToolchainBase, &po.Bases.Toolchain},
		{"--static-base", o.StaticBase, &po.Bases.Static},
	} {
		if b.value == "" {
			continue
		}
		ref, err := name.ParseReference(b.value, nopts...)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", b.flag, b.value, err))
			continue
		}
		*b.ref = ref
	}
	for _, c := range comps {
		if c.Base == images.BaseToolchain && o.ToolchainBase == "" {
			errs = append(errs, fmt.Errorf("%s needs --toolchain-base: an image with %s, because %s builds apps in its own process (see docs/images.md); or leave it out of --components", c.Name, c.Base.Needs(), c.Name))
		}
	}
	minimal := o.StaticBase == "" && slices.ContainsFunc(comps, func(c images.Component) bool { return c.Base == images.BaseStatic })
	if _, err := os.Stat(o.CABundle); minimal && err != nil {
		errs = append(errs, fmt.Errorf("--ca-bundle: the minimal base carries the build host's CA certificates: %w; give a PEM file, or --static-base", err))
	}
	if len(errs) > 0 {
		return po, errors.Join(errs...)
	}
	return po, po.Validate()
}

// Run builds and pushes the images, writing progress to progress and, once
// all are pushed, one line per image to out: its reference with its digest.
func (o *Options) Run(ctx context.Context, out, progress io.Writer) error {
	po, err := o.publishOptions()
	if err != nil {
		return err
	}
	po.Progress = progress
	if o.revisionErr != nil {
		fmt.Fprintf(progress, "no %s label: %v\n", images.LabelRevision, o.revisionErr)
	}
	pushed, err := images.Publish(ctx, po)
	if err != nil {
		return err
	}
	for _, p := range pushed {
		fmt.Fprintf(out, "%s@%s\n", p.Ref, p.Digest)
	}
	return nil
}

// Main is bex-images' command line: it parses args (without the program
// name), then completes, validates and runs the options. The pushed
// references go to out; progress and help to errOut. A refused command
// line is a command.UsageError.
func Main(ctx context.Context, args []string, out, errOut io.Writer) error {
	o := NewOptions()
	fs := command.NewFlagSet("bex-images", errOut)
	o.AddFlags(fs)
	if done, err := command.Parse(fs, args); done {
		return err
	}
	if err := o.Complete(ctx); err != nil {
		return err
	}
	if err := o.Validate(); err != nil {
		return command.Usage(err)
	}
	return o.Run(ctx, out, errOut)
}
