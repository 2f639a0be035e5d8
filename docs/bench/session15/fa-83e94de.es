/proc/fs/ext4/loop1/es_shrinker_info
stats:
  2 objects
  2 reclaimable objects
/proc/fs/ext4/loop2/es_shrinker_info
stats:
  2 objects
  2 reclaimable objects
/proc/fs/ext4/loop3/es_shrinker_info
stats:
  2 objects
  2 reclaimable objects
/proc/fs/ext4/loop7/es_shrinker_info
stats:
  22356 objects
  22356 reclaimable objects
/var/tmp/pagewise-bench/run-pagewise-delta-21877/db/bench.pw: 793 extents found
