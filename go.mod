module github.com/admit-dev/admit

go 1.26

require (
	github.com/dunglas/httpsfv v1.1.2
	github.com/redis/rueidis v1.0.79
)

require golang.org/x/sys v0.47.0 // indirect
