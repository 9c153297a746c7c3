"""Table-level state stored beside the data: reader leases (:mod:`.leases`)."""
