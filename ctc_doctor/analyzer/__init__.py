"""Everything that runs torch: target loading, capture, attribution, analysis. Returns Report objects."""
