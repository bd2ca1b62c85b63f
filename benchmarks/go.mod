module github.com/rlkit/rlkit/benchmarks

go 1.26

require (
	github.com/rlkit/rlkit v0.0.0-00010101000000-000000000000
	github.com/sethvargo/go-limiter v1.2.0
)

require go.yaml.in/yaml/v3 v3.0.6 // indirect

replace github.com/rlkit/rlkit => ../
