"""What is evaluated: case sets (`caseset`) and the suite that names them with its variants (`suite`)."""
