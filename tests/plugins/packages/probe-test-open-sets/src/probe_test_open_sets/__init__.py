"""Sets that plugins extend, extended from outside: a task, a framework, an acc-check backend, a name map."""
