package kindtest

//go:generate go run -C ../images/kubernetes -trimpath ./featuregates -o ../../kindtest/featuregates_generated.go

// featureGateSpec is what the generated list (featuregates_generated.go)
// knows of a feature gate: its stage (ALPHA, BETA, GA, DEPRECATED), its
// default and whether it is locked to that default.
type featureGateSpec struct {
	stage   string
	enabled bool
	locked  bool
}
