"""zt-launch: starts zerotrain (or any program) on N ranks with mpirun or srun."""
