module github.com/admit-dev/admit

go 1.26

require (
	github.com/redis/rueidis v1.0.79
	go.yaml.in/yaml/v3 v3.0.6
)

require golang.org/x/sys v0.47.0 // indirect
