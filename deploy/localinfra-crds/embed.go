package localinfracrds

import (
	"embed"
	"io/fs"
)

//go:embed *.yaml
var files embed.FS

// CRDs returns the provider's CRDs, one YAML file per CRD, for
// kubeapply.InstallCRDs.
func CRDs() fs.FS { return files }
