module github.com/admit-dev/admit
