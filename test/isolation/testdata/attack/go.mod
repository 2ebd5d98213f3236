module example.com/attack

go 1.25
