"""Business operations. Services take a Session and their collaborators (storage, queue, clock)
as arguments and raise errors from server.core.errors; they know nothing of HTTP."""
