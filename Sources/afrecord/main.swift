print("afrecord")
