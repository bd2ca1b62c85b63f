module github.com/rlkit/rlkit

go 1.26

require (
	github.com/golang-jwt/jwt/v5 v5.3.1
	go.yaml.in/yaml/v3 v3.0.6
)

require go.uber.org/goleak v1.3.0
