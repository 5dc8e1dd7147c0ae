print("xhrpcd")
