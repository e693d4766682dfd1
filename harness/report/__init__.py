"""`harness view`: a static HTML page of a receipt, readable offline."""
