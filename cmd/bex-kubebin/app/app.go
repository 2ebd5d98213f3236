package app

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"bex.co/bex/cmd/internal/command"
	"bex.co/bex/internal/kubebin"
)

// New returns the bex-kubebin command, printing paths to out and progress
// to errOut. A flag it does not know is a command.UsageError.
func New(out, errOut io.Writer) *cobra.Command {
	var versions, components, tools []string
	var cacheDir string
	cmd := &cobra.Command{
		Use:           "bex-kubebin",
		Short:         "Build the pinned kube-apiserver and etcd binaries, and any tools asked for, into the cache",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := kubebin.NewBuilder(kubebin.Options{CacheDir: cacheDir, Progress: errOut})
			if err != nil {
				return err
			}
			for _, c := range components {
				if !slices.Contains(kubebin.KubeComponents(), c) {
					return fmt.Errorf("unknown component %q (known: %s)", c, strings.Join(kubebin.KubeComponents(), ", "))
				}
			}
			for _, name := range tools {
				if kubebin.ToolVersion(name) == "" {
					return fmt.Errorf("unknown tool %q (known: %s)", name, strings.Join(kubebin.Tools(), ", "))
				}
			}
			// --tools alone builds only the tools.
			if len(tools) > 0 && !cmd.Flags().Changed("versions") {
				versions = nil
			} else {
				if len(versions) == 1 && versions[0] == "all" {
					versions = kubebin.KubeVersions()
				}
				etcd, err := b.Etcd(cmd.Context())
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "etcd v%s\t%s\n", kubebin.EtcdVersion, etcd)
			}
			for _, v := range versions {
				p, err := b.KubeAPIServer(cmd.Context(), v)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "kube-apiserver v%s\t%s\n", strings.TrimPrefix(v, "v"), p)
				for _, c := range components {
					p, err := b.KubeComponent(cmd.Context(), c, v)
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "%s v%s\t%s\n", c, strings.TrimPrefix(v, "v"), p)
				}
			}
			for _, name := range tools {
				p, err := b.Tool(cmd.Context(), name)
				if err != nil {
					return err
				}
				fmt.Fprintf(out, "%s %s\t%s\n", name, kubebin.ToolVersion(name), p)
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&versions, "versions", []string{kubebin.DefaultKubeVersion},
		"Kubernetes versions to build, comma-separated, or \"all\" (pinned: "+strings.Join(kubebin.KubeVersions(), ", ")+")")
	cmd.Flags().StringSliceVar(&components, "components", nil,
		"Kubernetes components to build beside kube-apiserver for each of --versions, comma-separated ("+strings.Join(kubebin.KubeComponents(), ", ")+")")
	cmd.Flags().StringSliceVar(&tools, "tools", nil,
		"tools to build, comma-separated (known: "+strings.Join(kubebin.Tools(), ", ")+"); without --versions, only these are built")
	cmd.Flags().StringVar(&cacheDir, "cache-dir", "", "where builds are kept (default $BEX_CACHE_DIR, else the user cache directory's bex/)")
	command.CobraUsage(cmd)
	return cmd
}
