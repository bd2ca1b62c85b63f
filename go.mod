module github.com/rlkit/rlkit

go 1.26
