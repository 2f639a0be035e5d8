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
  22531 objects
  22531 reclaimable objects
/var/tmp/pagewise-bench/run-pagewise-delta-22021/db/bench.pw: 673 extents found
