package workerhook_test

import (
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"bex.co/bex/internal/pgtest"
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	pgtest.Main(m)
}
